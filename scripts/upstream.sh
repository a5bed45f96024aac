#!/bin/bash
# upstream.sh [--fetch-only | --print-configure | --configure-only NAME]:
# a comparison build of upstream QEMU 10.0 as Debian ships it, in
# build/upstream (make upstream).  Not part of the fork: nothing of it is
# ever committed, and no patch of ours is applied to it.  bench/run.py
# --builds ... upstream and bench/profile.py measure it beside base and fork.
#
# What it fetches, through a private apt configuration under
# .cache/upstream/apt (the machine's own sources and apt cache are untouched,
# as in scripts/apt-src.sh):
#   - the newest qemu source package of the UPSTREAM_SERIES (default 10.0)
#     in trixie or trixie-security;
#   - trixie's meson .deb, unpacked with dpkg-deb -x under .cache/upstream
#     and put first in PATH/PYTHONPATH for this build only (10.0 needs
#     meson >= 1.5; bookworm has 1.0.1).  Nothing is installed.
#
# What is trusted, exactly as with apt-get source: the Debian archive keys in
# /usr/share/keyrings/debian-archive-keyring.gpg (package
# debian-archive-keyring).  apt-get update checks the signature of each
# suite's InRelease with them and the Sources/Packages indices against its
# hashes; apt-get source and apt-get download then check every downloaded
# file against the SHA256 of those indices and fail on a mismatch.  The .dsc's
# own OpenPGP signature (a maintainer's key) is not checked: no keyring for
# it is installed, so dpkg-source runs with --no-check, as in fetch-base.sh.
# There is no pin: "newest" moves with the archive.  The version and the
# sha256 of each file used are written to build/upstream.version, which the
# benchmark reports quote.  Once fetched, the archive is asked again only
# with UPSTREAM_REFRESH=1.
#
# The build uses scripts/build.sh, so its configure line is build.sh's line
# for a 10.x tree (that of base and fork without the 7.2-only
# --with-git-submodules=ignore), plus --disable-install-blobs: the +ds source
# has no firmware, and 10.0's meson setup fails on the missing files
# otherwise (Debian's own build passes it too); scripts/firmware.sh links
# Debian's firmware in, as for base and fork.  About 25 minutes on 2 cores,
# cold.
#
# The other modes build nothing; each fetches first if needed (about 15 s
# and 80 MB on a fresh clone, nothing once cached):
#   --fetch-only         the source in build/src/upstream and the meson.
#   --print-configure    the configure arguments of build/upstream, one per
#                        line (scripts/build.sh --print-configure).
#   --configure-only NAME
#                        configure build/NAME with the line and the meson of
#                        build/upstream, and stop (about a minute).
# tests/configure.py (suite "configure" of make test) uses them, so that a
# configure line that 10.0 rejects fails make test, not a 25-minute build.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
series=${UPSTREAM_SERIES:-10.0}
cache=$top/.cache/upstream
apt_dir=$cache/apt
dl=$cache/download
mesondir=$cache/meson
src=$top/build/src/upstream
info=$top/build/upstream.version

die() { echo "upstream: error: $*" >&2; exit 1; }

mode=build
case ${1:-} in
    "") ;;
    --fetch-only) mode=fetch ;;
    --print-configure) mode=print ;;
    --configure-only)
        mode=configure
        check_name=${2:?usage: upstream.sh --configure-only NAME}
        [ "$check_name" != upstream ] ||
            die "--configure-only upstream would replace build/upstream; give another NAME"
        ;;
    *) die "unknown argument '$1'; usage: upstream.sh [--fetch-only | --print-configure | --configure-only NAME]" ;;
esac
# --print-configure: only the arguments on stdout, the rest on stderr.
if [ "$mode" = print ]; then exec 3>&1 1>&2; fi

for tool in apt-get apt-cache dpkg-source dpkg-deb; do
    command -v "$tool" >/dev/null || die "$tool not found: this needs Debian 12 with dpkg-dev; run 'make deps'"
done
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    die "/usr/share/keyrings/debian-archive-keyring.gpg is missing; run 'make deps' (debian-archive-keyring)"

apt_opts=(-o "Dir::State::Lists=$apt_dir/lists"
          -o "Dir::Cache=$apt_dir/cache"
          -o "Dir::Etc::SourceParts=$apt_dir/parts"
          -o "Dir::Etc::SourceList=/dev/null"
          -o "Dir::Etc::PreferencesParts=$apt_dir/prefs"
          -o "Dir::Etc::Preferences=/dev/null"
          -o "APT::Sandbox::User=root")

fetch() {
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" \
             "$apt_dir/parts" "$apt_dir/prefs" "$dl"
    cat >"$apt_dir/parts/trixie.sources" <<'SOURCES'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    echo "upstream: updating the private trixie index in $apt_dir"
    apt-get "${apt_opts[@]}" -q update >"$apt_dir/update.log" 2>&1 ||
        die "apt-get update failed (no network, or the archive is unreachable); see $apt_dir/update.log, then run 'make upstream' again"
    # A signature that does not verify is only a warning to apt-get update
    # (the suite is then left out), so look for it.
    if grep -Eq '^(W|E): .*(NO_PUBKEY|not signed|signature|EXPKEYSIG)' "$apt_dir/update.log"; then
        grep -E '^(W|E):' "$apt_dir/update.log" >&2
        die "the trixie index did not verify (see above); update debian-archive-keyring ('apt-get install debian-archive-keyring') and run 'make upstream' again"
    fi

    # The newest source version of the series, by Debian's version order.
    local v best=
    while read -r v; do
        case $v in
            *:"$series".*|"$series".*) ;;
            *) continue ;;
        esac
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
    done < <(apt-cache "${apt_opts[@]}" showsrc qemu 2>/dev/null | sed -n 's/^Version: //p')
    [ -n "$best" ] ||
        die "no qemu $series.x source package in trixie or trixie-security (see $apt_dir/update.log); set UPSTREAM_SERIES to a series the archive has"
    qemu_version=$best

    meson_version=$(apt-cache "${apt_opts[@]}" policy meson | sed -n 's/^ *Candidate: //p')
    if [ -z "$meson_version" ] || [ "$meson_version" = "(none)" ]; then
        die "no meson binary package in trixie's index (see $apt_dir/update.log)"
    fi

    echo "upstream: downloading qemu=$qemu_version (source) and meson=$meson_version (.deb)"
    (cd "$dl" && apt-get "${apt_opts[@]}" -q source --download-only "qemu=$qemu_version") \
        >"$apt_dir/source.log" 2>&1 ||
        die "apt-get source qemu=$qemu_version failed (a file that does not match the archive's index fails here too); see $apt_dir/source.log"
    (cd "$dl" && apt-get "${apt_opts[@]}" -q download "meson=$meson_version") \
        >"$apt_dir/download.log" 2>&1 ||
        die "apt-get download meson=$meson_version failed; see $apt_dir/download.log"
}

# Ask the archive again only when something is missing or UPSTREAM_REFRESH=1
# (then a newer 10.0 upload replaces the source and the build reconfigures).
if [ -z "${UPSTREAM_REFRESH:-}" ] && [ -f "$src/VERSION" ] && [ -f "$src.stamp" ] &&
   [ -f "$mesondir.stamp" ] && [ -f "$info" ]; then
    qemu_version=$(cat "$src.stamp") meson_version=$(cat "$mesondir.stamp")
    echo "upstream: have qemu $qemu_version (UPSTREAM_REFRESH=1 asks the archive for a newer one)"
else
    fetch
fi
noepoch=${qemu_version#*:}
dsc=$dl/qemu_$noepoch.dsc
[ -f "$dsc" ] || die "apt-get source left no $dsc; see $apt_dir/source.log"
meson_deb=$(ls "$dl"/meson_"${meson_version#*:}"_all.deb 2>/dev/null) ||
    die "apt-get download left no meson_${meson_version#*:}_all.deb in $dl"

if [ "$(cat "$mesondir.stamp" 2>/dev/null)" != "$meson_version" ]; then
    rm -rf "$mesondir"
    dpkg-deb -x "$meson_deb" "$mesondir" || die "dpkg-deb -x $meson_deb failed"
    echo "$meson_version" >"$mesondir.stamp"
fi
if [ ! -x "$mesondir/usr/bin/meson" ] || [ ! -d "$mesondir/usr/lib/python3/dist-packages/mesonbuild" ]; then
    die "$meson_deb has no usr/bin/meson or mesonbuild; remove $mesondir and run 'make upstream' again"
fi

if [ "$(cat "$src.stamp" 2>/dev/null)" != "$qemu_version" ] || [ ! -f "$src/VERSION" ]; then
    echo "upstream: unpacking qemu $qemu_version into $src"
    rm -rf "$src" "$src.tmp" "$src.stamp"
    mkdir -p "$(dirname "$src")"
    dpkg-source --no-check -x "$dsc" "$src.tmp" >"$cache/unpack.log" 2>&1 ||
        die "dpkg-source -x $dsc failed; see $cache/unpack.log"
    mv "$src.tmp" "$src"
    echo "$qemu_version" >"$src.stamp"
fi

{
    echo "qemu $qemu_version (QEMU $(cat "$src/VERSION")) from trixie/trixie-security, built with meson $meson_version"
    mapfile -t orig < <(sed -n '/^Checksums-Sha256:/,/^[^ ]/s/^ [0-9a-f]* [0-9]* //p' "$dsc")
    (cd "$dl" && sha256sum "$(basename "$dsc")" "${orig[@]}" "$(basename "$meson_deb")")
} >"$info.tmp"
mv "$info.tmp" "$info"

# build.sh with trixie's meson and the options of this build, in every mode.
build_sh() {
    PATH=$mesondir/usr/bin:$PATH \
    PYTHONPATH=$mesondir/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH} \
    CONFIGURE_EXTRA="--disable-install-blobs ${CONFIGURE_EXTRA:-}" \
        "$top/scripts/build.sh" "$@"
}
case $mode in
    fetch)
        echo "upstream: QEMU $(cat "$src/VERSION") in $src, meson $meson_version in $mesondir"
        exit 0 ;;
    print) build_sh --print-configure upstream "$src" >&3; exit 0 ;;
    configure) build_sh --configure-only "$check_name" "$src"; exit 0 ;;
esac

echo "upstream: building QEMU $(cat "$src/VERSION") with meson $meson_version into build/upstream"
start=$SECONDS
build_sh upstream "$src"
echo "upstream: build/upstream ready in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s ($(head -n 1 "$info"))"
