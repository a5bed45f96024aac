#!/bin/bash
# shellcheck disable=SC2016  # single-quoted: for the shell of a hook or of the root
# deb-root.sh DSC OUT: build the binary packages of the source package DSC
# in a clean root of the line's Debian release, as Debian's buildds do, and
# put them (.deb, .changes, .buildinfo) into OUT; the build's output goes to
# OUT/build.log.  The root is made for this one build by mmdebstrap from
# Debian's archive (variant buildd: the essential packages, apt and
# build-essential), gets exactly the build dependencies apt-get build-dep
# computes for the .dsc (arch-only, profile pkg.qemu.x86only), builds as an
# unprivileged user and is deleted afterwards.  The host gets nothing but
# mmdebstrap (make deps-deb); what the packages are built from does not
# depend on what the host has installed.
#
# Kept between builds, in DEB_CACHE (default /var/cache/qemu-iobatch):
#   apt-LINE/  the downloaded .debs of the root, so a second build does not
#              fetch them again (apt still checks them against the archive);
#   ccache/    the compiler cache, bind-mounted into the root at /ccache
#              (the build compiles in /build/src, the same path every time).
# DEB_MIRROR and DEB_SECURITY_MIRROR choose the archive (default
# deb.debian.org); the suites are the line's (scripts/line.sh).
#
# deb-root.sh --hook ROOT is mmdebstrap's customize hook (runs on the host).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
die() { echo "deb-root: error: $*" >&2; exit 1; }
PROFILE=pkg.qemu.x86only
cache=${DEB_CACHE:-/var/cache/qemu-iobatch}
BUILD_UID=2000      # the build user in the root; owns $cache/ccache

# --hook ROOT: in the finished root, with the source package in ROOT/build,
# mount the compiler cache, build as the user 'builder', and unmount the cache
# again whatever happens (mmdebstrap deletes the root afterwards).
if [ "${1:-}" = --hook ]; then
    root=$2
    mkdir -p "$root/ccache"
    mount --bind "$cache/ccache" "$root/ccache"
    # Unmount also when interrupted: mmdebstrap deletes the root afterwards,
    # and a cache still mounted in it would be deleted with it.
    trap 'umount "$root/ccache"' EXIT
    trap 'exit 1' INT TERM HUP
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin JOBS="$JOBS" \
        PROFILE="$PROFILE" BUILD_UID="$BUILD_UID" /bin/bash -euo pipefail -c '
        cd /build
        # QEMU compiles with "cc" (and "c++"), which the ccache package
        # links in /usr/lib/ccache only on some hosts: link them here.
        for c in cc c++; do ln -sfn ../../bin/ccache "/usr/lib/ccache/$c"; done
        dpkg-source --no-check -x ./*.dsc src >/dev/null
        echo "deb-root: apt-get build-dep in the root"
        apt-get build-dep -y -q --no-install-recommends --arch-only -P "$PROFILE" ./src >/build/deps.log 2>&1 || {
            tail -n 20 /build/deps.log; echo "deb-root: apt-get build-dep failed in the root" >&2; exit 1; }
        useradd --uid "$BUILD_UID" --home-dir /build --no-create-home builder
        chown -R builder: /build
        echo "deb-root: dpkg-buildpackage as builder, $JOBS jobs"
        cd /build/src
        # Zeroed, so that the hits and misses printed after the build are of
        # this build alone.
        runuser -u builder -- env CCACHE_DIR=/ccache ccache -z >/dev/null
        runuser -u builder -- env HOME=/build CCACHE_DIR=/ccache PATH=/usr/lib/ccache:$PATH \
            DEB_BUILD_OPTIONS="nocheck parallel=$JOBS" \
            dpkg-buildpackage -B -us -uc -P"$PROFILE" -j"$JOBS"
        echo "deb-root: ccache: $(runuser -u builder -- env CCACHE_DIR=/ccache ccache -s | tr -s " " | grep -iE "hits|misses" | tr "\n" " ")"
        mkdir /build/out
        mv /build/*.deb /build/*.changes /build/*.buildinfo /build/out/'
    exit
fi

[ $# -eq 2 ] || die "usage: deb-root.sh DSC OUT"
dsc=$(realpath "$1")
out=$(realpath "$2")
[ -f "$dsc" ] || die "$dsc: no such source package"
# The .dsc and the files it lists (Files:), all beside it.
mapfile -t files < <(awk '/^Files:/ { f = 1; next } /^[^ ]/ { f = 0 } f && NF == 3 { print $3 }' "$dsc")
[ ${#files[@]} -gt 0 ] || die "$dsc lists no files"
in=("$dsc")
for f in "${files[@]}"; do
    [ -f "$(dirname "$dsc")/$f" ] || die "$dsc: $f is not beside it"
    in+=("$(dirname "$dsc")/$f")
done
[ "$(id -u)" -eq 0 ] || die "run as root: mmdebstrap makes the build root in root mode"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found; run 'make deps-deb' (apt-get install mmdebstrap)"
export JOBS=${JOBS:-$(nproc)}
mirror=${DEB_MIRROR:-http://deb.debian.org/debian}
secmirror=${DEB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
apt_cache=$cache/apt-$LINE
mkdir -p "$apt_cache" "$cache/ccache"
chown "$BUILD_UID:$BUILD_UID" "$cache/ccache"
tmp=$(mktemp -d "$out/.root-out.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
q() { printf '%q' "$1"; }
hooks=(
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"'
    --setup-hook="sync-in $(q "$apt_cache") /var/cache/apt/archives"
    --customize-hook='mkdir "$1/build"'
    --customize-hook="copy-in $(for f in "${in[@]}"; do printf '%q ' "$f"; done)/build"
    --customize-hook="$(q "$top/scripts/deb-root.sh") --hook \"\$1\""
    --customize-hook="sync-out /var/cache/apt/archives $(q "$apt_cache")"
    --customize-hook="sync-out /build/out $(q "$tmp")"
)
echo "deb-root: building $(basename "$dsc") in a clean $LINE root (mmdebstrap, variant buildd;" \
     "log: $out/build.log)"
LINE=$LINE mmdebstrap --mode=root --variant=buildd --include=ccache,fakeroot \
    --aptopt='APT::Install-Recommends "false"' --skip=essential/unlink \
    "${hooks[@]}" "$LINE" /dev/null \
    "deb $mirror ${LINE_SUITES[*]} main" "deb $secmirror $LINE_SECURITY_SUITE main" \
    >"$out/build.log" 2>&1 || {
    tail -n 40 "$out/build.log" >&2
    die "the build in the clean root failed; see $out/build.log"; }
mv "$tmp"/* "$out/"
