# Sourced by fetch-base.sh and check-update.sh (after scripts/line.sh): a
# private apt configuration under .cache/apt/LINE with deb-src entries for the
# line's suites (bookworm, bookworm-updates and bookworm-security for the
# bookworm line; the same of trixie for trixie), so that the machine's own
# sources.list (which has no deb-src line on a stock Debian 12) is neither
# needed nor touched, and one line's index never answers for another's.
# Sets APT_DIR and APT_OPTS; apt_src_update refreshes the index.
APT_DIR=$top/.cache/apt/$LINE
APT_OPTS=(-o "Dir::State::Lists=$APT_DIR/lists"
          -o "Dir::Etc::SourceParts=$APT_DIR/parts"
          -o "Dir::Etc::SourceList=/dev/null"
          -o "APT::Sandbox::User=root")

apt_src_update() {
    command -v apt-get >/dev/null || { echo "apt-get not found: this needs Debian 12" >&2; return 1; }
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/parts"
    cat >"$APT_DIR/parts/$LINE-src.sources" <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: ${LINE_SUITES[*]}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $LINE_SECURITY_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    apt-get "${APT_OPTS[@]}" -q update >"$APT_DIR/update.log" 2>&1 || return 1
    # A suite whose signature does not verify is only a warning to apt-get
    # update, which then leaves that suite out: its versions would be
    # missing without a word.
    if grep -Eq '^(W|E): .*(NO_PUBKEY|not signed|signature|EXPKEYSIG)' "$APT_DIR/update.log"; then
        grep -E '^(W|E):' "$APT_DIR/update.log" >&2
        echo "the $LINE index did not verify (above); update debian-archive-keyring ('apt-get install debian-archive-keyring') and try again" >&2
        return 1
    fi
}
