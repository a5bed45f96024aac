#!/bin/bash
# deb-src.sh: the fork as a Debian source package in build/deb: the pinned
# .dsc unpacked, packaging/x86only.patch applied to debian/, patches/series
# added as quilt patches (debian/patches/iobatch/), a changelog entry for
# VERSION+iobatchN dated from git, then 'dpkg-source -b'.  Prints the path of
# the unpacked source tree.  Does nothing when its inputs did not change.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/base.pin"
. "$top/scripts/groups.sh"
# Bump when the series changes on the same base; back to 1 when base.pin moves.
IOBATCH_REV=1
out=$top/build/deb
dl=$top/.cache/download
debver=$VERSION+iobatch$IOBATCH_REV
upver=${VERSION#*:}; upver=${upver%-*}           # 7.2+dfsg
src=$out/$PACKAGE-$upver

die() { echo "deb-src: error: $*" >&2; exit 1; }

command -v dpkg-source >/dev/null || die "dpkg-source not found; run 'make deps'"
check_series || die "fix patches/series"
mapfile -t series < <(for g in "${PATCH_GROUPS[@]}"; do series_in "$g"; done)

# The date of the last commit that changed what goes into the source
# package (not the apt preferences file beside it), so
# that the same commit always gives the same changelog (and the same
# SOURCE_DATE_EPOCH for the build).
inputs=(base.pin patches packaging/x86only.patch scripts/deb-src.sh)
date=$(cd "$top" && LC_ALL=C git log -1 --date=format:'%a, %d %b %Y %H:%M:%S %z' \
       --format=%cd -- "${inputs[@]}") || true
[ -n "$date" ] || die "no git history for ${inputs[*]}; run this in a git clone of qemu-iobatch"
if [ -n "$(cd "$top" && git status --porcelain -- "${inputs[@]}")" ]; then
    echo "deb-src: warning: uncommitted changes in ${inputs[*]}: the package" \
         "version $debver does not identify them; commit first" >&2
fi

stamp=$(cd "$top" && { echo "$debver $date"; cat base.pin packaging/x86only.patch \
        scripts/deb-src.sh patches/series; for p in "${series[@]}"; do cat "patches/$p"; done; } |
        sha256sum)
dsc=$out/${PACKAGE}_${debver#*:}.dsc
if [ -f "$dsc" ] && [ -d "$src/debian" ] && [ "$(cat "$out/src.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$src"; exit 0
fi

"$top/scripts/fetch-base.sh" >&2
(cd "$dl" && sha256sum --quiet -c -) <<EOF || die "checksum mismatch in $dl; remove it and run 'make fetch'"
$DSC_SHA256  $DSC
$ORIG_SHA256  $ORIG
$DEBIAN_SHA256  $DEBIAN
EOF

echo "deb-src: preparing $PACKAGE $debver in $src" >&2
rm -rf "$out"
mkdir -p "$out"
ln "$dl/$ORIG" "$out/$ORIG" 2>/dev/null || cp "$dl/$ORIG" "$out/$ORIG"
dpkg-source --no-check -x "$dl/$DSC" "$src" >"$out/unpack.log" 2>&1 ||
    die "dpkg-source -x failed; see $out/unpack.log"

patch -s -p1 -F0 --no-backup-if-mismatch -d "$src" <"$top/packaging/x86only.patch" ||
    die "packaging/x86only.patch does not apply to debian/ of $VERSION; update it (docs/install.md)"

# Our series, after Debian's patches.
{ echo; echo "# qemu-iobatch: patches/series of qemu-iobatch"; } >>"$src/debian/patches/series"
for p in "${series[@]}"; do
    install -D -m 644 "$top/patches/$p" "$src/debian/patches/iobatch/$p"
    echo "iobatch/$p" >>"$src/debian/patches/series"
done

subject() {  # the Subject: of a git format-patch file, unfolded, without [PATCH]
    awk '/^Subject: /{ s = $0; sub(/^Subject: (\[PATCH[^]]*\] )?/, "", s)
                       while ((getline l) > 0 && l ~ /^[ \t]/) s = s l
                       print s; exit }' "$1"
}
{
    echo "$PACKAGE ($debver) bookworm; urgency=medium"
    echo
    echo "  * qemu-iobatch: the virtio-blk I/O batching series of qemu-iobatch"
    echo "    on Debian's $VERSION (debian/patches/iobatch/):"
    for p in "${series[@]}"; do echo "    - $(subject "$top/patches/$p")"; done
    echo "  * Build profile pkg.qemu.x86only: the x86 system emulators alone."
    echo
    echo " -- qemu-iobatch <qemu-iobatch@localhost>  $date"
    echo
    cat "$src/debian/changelog"
} >"$out/changelog"
mv "$out/changelog" "$src/debian/changelog"
[ "$(cd "$src" && dpkg-parsechangelog -S Version)" = "$debver" ] ||
    die "debian/changelog does not parse as version $debver"

(cd "$src" && dpkg-source --before-build .) >"$out/patches.log" 2>&1 || {
    tail -n 20 "$out/patches.log" >&2
    die "the series does not apply as quilt patches on $VERSION; see $out/patches.log"; }
(cd "$out" && dpkg-source -b "$(basename "$src")") >"$out/source.log" 2>&1 || {
    tail -n 20 "$out/source.log" >&2
    die "dpkg-source -b failed; see $out/source.log"; }
[ -f "$dsc" ] || die "dpkg-source -b made no $dsc"
echo "$stamp" >"$out/src.stamp"
echo "deb-src: source package $(basename "$dsc")" >&2
echo "$src"
