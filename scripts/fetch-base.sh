#!/bin/bash
# fetch-base.sh [--download-only]: fetch the pinned Debian source package of
# the line LINE (lines/LINE/base.pin; scripts/line.sh), verify it and unpack
# it with Debian's patches applied into the line's build/src/base (bookworm:
# build/src/base; trixie: build/trixie/src/base), as a git repository with a
# single commit tagged "base".  Idempotent: does nothing when that exists.
# With --download-only, downloads and verifies the three files into
# .cache/download and stops there (nothing is unpacked).
#
# apt gets a private configuration under .cache/apt/LINE
# (scripts/apt-src.sh), so the machine's own sources.list (which has no
# deb-src line on a stock Debian 12) is untouched.  Whatever apt checked,
# nothing is unpacked unless the .dsc and both tarballs have the sha256 of
# the pin.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
# shellcheck disable=SC1090  # the pin: VAR=value lines
. "$LINE_PIN"
for key in PACKAGE VERSION DSC DSC_SHA256 ORIG ORIG_SHA256 DEBIAN DEBIAN_SHA256; do
    [ -n "${!key:-}" ] || { echo "fetch-base: error: $LINE_REL/base.pin has no $key=" >&2; exit 1; }
done
cache=$top/.cache
dl=$cache/download
src=$LINE_BUILD/src/base

die() { echo "fetch-base: error: $*" >&2; exit 1; }

download_only=0
case ${1:-} in
    "") ;;
    --download-only) download_only=1 ;;
    *) die "unknown argument '$1'; usage: fetch-base.sh [--download-only]" ;;
esac

stamp=$src.stamp
if [ "$download_only" -eq 0 ] && [ -d "$src/.git" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
    exit 0
fi

verify() {
    (cd "$dl" && sha256sum --quiet -c - ) <<EOF2
$DSC_SHA256  $DSC
$ORIG_SHA256  $ORIG
$DEBIAN_SHA256  $DEBIAN
EOF2
}

mkdir -p "$dl"
if ! verify >/dev/null 2>&1; then
    . "$top/scripts/apt-src.sh"
    echo "fetch-base: updating the private deb-src index of the $LINE line in $APT_DIR"
    apt_src_update ||
        die "apt-get update failed (no network, or the archive is unreachable); see $APT_DIR/update.log, then run 'make fetch$LINE_MAKE' again"
    echo "fetch-base: downloading $PACKAGE=$VERSION ($LINE_REL/base.pin)"
    (cd "$dl" && apt-get "${APT_OPTS[@]}" -q source --download-only "$PACKAGE=$VERSION") \
        >"$APT_DIR/source.log" 2>&1 ||
        die "apt-get source $PACKAGE=$VERSION failed; see $APT_DIR/source.log. If the version is gone from the archive, 'make check-update$LINE_MAKE' finds the newest and moves $LINE_REL/base.pin to it (docs/patch-workflow.md)"
    if ! verify; then
        rm -f "$dl/$DSC" "$dl/$ORIG" "$dl/$DEBIAN"
        die "checksum mismatch for $PACKAGE=$VERSION against $LINE_REL/base.pin (see above); the files were removed. Run 'make fetch$LINE_MAKE' again to download them again; if it fails the same way, do not edit the pin to match unless you meant to change the base ('make check-update$LINE_MAKE' verifies a new version against the archive's signed index)"
    fi
fi
if [ "$download_only" -eq 1 ]; then
    echo "fetch-base: $PACKAGE $VERSION verified against $LINE_REL/base.pin in $dl"
    exit 0
fi

echo "fetch-base: unpacking into $src"
rm -rf "$src" "$src.tmp" "$stamp"
mkdir -p "$(dirname "$src")"
unpack_log=$src.unpack.log
dpkg-source --no-check -x "$dl/$DSC" "$src.tmp" >"$unpack_log" 2>&1 ||
    die "dpkg-source -x failed; see $unpack_log"
rm -rf "$src.tmp/.pc"

# One commit with fixed identity and date, so that the base commit is the
# same on every machine.
export GIT_AUTHOR_NAME="Debian QEMU Team" GIT_AUTHOR_EMAIL="pkg-qemu-devel@lists.alioth.debian.org"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z"
# No automatic gc: the commit's tens of thousands of loose objects would
# start one in the background, still packing them when the directory is
# renamed below and the fork's tree is cloned from it (once seen:
# "fatal: failed to copy file to .../objects/..").
git -C "$src.tmp" init -q -b debian
git -C "$src.tmp" config gc.auto 0
git -C "$src.tmp" add -A -f .
git -C "$src.tmp" commit -q --no-verify -m "Debian $PACKAGE $VERSION (unpacked, Debian patches applied)"
git -C "$src.tmp" tag base
mv "$src.tmp" "$src"
echo "$VERSION" >"$stamp"
echo "fetch-base: $PACKAGE $VERSION ready ($(cat "$src/VERSION"))"
