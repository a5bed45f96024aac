#!/bin/bash
# Fetch the pinned Debian source package (base.pin), verify it and unpack it
# with Debian's patches applied into build/src/base, as a git repository with
# a single commit tagged "base".  Idempotent: does nothing when that exists.
#
# apt gets a private configuration under .cache/apt (scripts/apt-src.sh), so
# the machine's own sources.list (which has no deb-src line on a stock
# Debian 12) is untouched.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/base.pin"
cache=$top/.cache
dl=$cache/download
src=$top/build/src/base

die() { echo "fetch-base: error: $*" >&2; exit 1; }

stamp=$src.stamp
if [ -d "$src/.git" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSION" ]; then
    exit 0
fi

verify() {
    (cd "$dl" && sha256sum --quiet -c - ) <<EOF
$DSC_SHA256  $DSC
$ORIG_SHA256  $ORIG
$DEBIAN_SHA256  $DEBIAN
EOF
}

mkdir -p "$dl"
if ! verify >/dev/null 2>&1; then
    . "$top/scripts/apt-src.sh"
    echo "fetch-base: updating the private deb-src index in $APT_DIR"
    apt_src_update ||
        die "apt-get update failed (no network, or the archive is unreachable); see $APT_DIR/update.log, then run 'make fetch' again"
    echo "fetch-base: downloading $PACKAGE=$VERSION"
    (cd "$dl" && apt-get "${APT_OPTS[@]}" -q source --download-only "$PACKAGE=$VERSION") \
        >"$APT_DIR/source.log" 2>&1 ||
        die "apt-get source $PACKAGE=$VERSION failed; see $APT_DIR/source.log. If the version is gone from the archive, pin a new one in base.pin"
    if ! verify; then
        rm -f "$dl/$DSC" "$dl/$ORIG" "$dl/$DEBIAN"
        die "checksum mismatch for $PACKAGE=$VERSION (see above); the files were removed. Do not edit base.pin to match unless you meant to change the base"
    fi
fi

echo "fetch-base: unpacking into $src"
rm -rf "$src" "$src.tmp" "$stamp"
mkdir -p "$(dirname "$src")"
dpkg-source --no-check -x "$dl/$DSC" "$src.tmp" >"$cache/unpack.log" 2>&1 ||
    die "dpkg-source -x failed; see $cache/unpack.log"
rm -rf "$src.tmp/.pc"

# One commit with fixed identity and date, so that the base commit is the
# same on every machine.
export GIT_AUTHOR_NAME="Debian QEMU Team" GIT_AUTHOR_EMAIL="pkg-qemu-devel@lists.alioth.debian.org"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z"
git -C "$src.tmp" init -q -b debian
git -C "$src.tmp" add -A -f .
git -C "$src.tmp" commit -q --no-verify -m "Debian $PACKAGE $VERSION (unpacked, Debian patches applied)"
git -C "$src.tmp" tag base
mv "$src.tmp" "$src"
echo "$VERSION" >"$stamp"
echo "fetch-base: $PACKAGE $VERSION ready ($(cat "$src/VERSION"))"
