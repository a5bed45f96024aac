# Sourced by fetch-base.sh and check-update.sh: a private apt configuration
# under .cache/apt with deb-src entries for bookworm, bookworm-updates and
# bookworm-security, so that the machine's own sources.list (which has no
# deb-src line on a stock Debian 12) is neither needed nor touched.
# Sets APT_DIR and APT_OPTS; apt_src_update refreshes the index.
APT_DIR=$top/.cache/apt
APT_OPTS=(-o "Dir::State::Lists=$APT_DIR/lists"
          -o "Dir::Etc::SourceParts=$APT_DIR/parts"
          -o "Dir::Etc::SourceList=/dev/null"
          -o "APT::Sandbox::User=root")

apt_src_update() {
    command -v apt-get >/dev/null || { echo "apt-get not found: this needs Debian 12" >&2; return 1; }
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/parts"
    cat >"$APT_DIR/parts/bookworm-src.sources" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    apt-get "${APT_OPTS[@]}" -q update >"$APT_DIR/update.log" 2>&1
}
