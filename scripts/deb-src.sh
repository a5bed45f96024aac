#!/bin/bash
# deb-src.sh: the fork's line LINE (scripts/line.sh) as a Debian source
# package: the .dsc pinned in lines/LINE/base.pin unpacked in the line's
# deb-work (build/deb-work; trixie: build/trixie/deb-work), the line's
# packaging patch applied to debian/ (LINE_PACKAGING: packaging/
# x86only.patch, x86only-trixie.patch), lines/LINE/patches/series added as
# quilt patches (debian/patches/iobatch/), debian/rules' package
# version naming the series, the project as Maintainer (packaging/maintainer;
# Debian's team becomes XSBC-Original-Maintainer), the fork's releases of
# the line (LINE_CHANGELOG: packaging/changelog, changelog-trixie) merged
# into Debian's debian/changelog (scripts/deb-changelog.py), with an entry
# generated for VERSION+iobatchN (scripts/version.sh deb) dated from git
# when it is not a recorded release, then 'dpkg-source -b'; the source
# package goes to DEB_OUT (default build/deb; trixie: build/trixie/deb).
# Prints the path of the unpacked source tree.  Does nothing when its inputs
# did not change.
# With --check, only tells by its exit status whether DEB_OUT has the
# packages of the current source already (built by scripts/deb.sh).
#
# Every build unpacks into the same directory, build/deb-work, so that a
# second build (another N, another DEB_OUT) compiles the same paths and
# ccache serves it; DEB_OUT keeps the packages of each.  DEB_WORK=DIR
# unpacks elsewhere (tests/packaging.py, which leaves build/deb-work alone).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
line_packaged "Debian packages of the fork (make deb)"
# shellcheck disable=SC1090  # the pin: VAR=value lines
. "$LINE_PIN"
. "$top/scripts/groups.sh"
out=${DEB_OUT:-$LINE_BUILD/deb}
work=${DEB_WORK:-$LINE_BUILD/deb-work}
packaging=${LINE_PACKAGING#"$top"/}
changelog=${LINE_CHANGELOG#"$top"/}
dl=$top/.cache/download
die() { echo "deb-src: error: $*" >&2; exit 1; }
debver=$("$top/scripts/version.sh" deb) || die "no package version (above)"
seriesid=$("$top/scripts/version.sh" series) || die "no series (above)"
upver=${VERSION#*:}; upver=${upver%-*}           # 7.2+dfsg
src=$work/$PACKAGE-$upver

command -v dpkg-source >/dev/null || die "dpkg-source not found; run 'make deps'"
check_series || die "fix $LINE_REL/patches/series"
mapfile -t series < <(for g in "${PATCH_GROUPS[@]}"; do series_in "$g"; done)

# The date of the last commit that changed what goes into the source
# package (not the apt preferences file beside it), so
# that the same commit always gives the same changelog (and the same
# SOURCE_DATE_EPOCH for the build).  The pin and the series were at the top
# (base.pin, patches/) before lines/.
inputs=("$LINE_REL/base.pin" "$LINE_REL/patches" "$packaging" packaging/maintainer
        "$changelog" scripts/deb-src.sh scripts/deb-changelog.py)
[ -z "$LINE_FORMER_PATCHES" ] || inputs+=(base.pin "$LINE_FORMER_PATCHES")
date=$(cd "$top" && LC_ALL=C git log -1 --date=format:'%a, %d %b %Y %H:%M:%S %z' \
       --format=%cd -- "${inputs[@]}" 2>/dev/null) || true
if [ -z "$date" ]; then
    # Without git history only with IOBATCH_REV (scripts/version.sh).
    date=$(LC_ALL=C date -R -r "$LINE_PATCHES/series")
fi
stamp=$(cd "$top" && { echo "$debver $date"; cat "$LINE_REL/base.pin" "$packaging" \
        packaging/maintainer "$changelog" scripts/deb-src.sh scripts/deb-changelog.py \
        "$LINE_REL/patches/series"; for p in "${series[@]}"; do cat "$LINE_REL/patches/$p"; done; } |
        sha256sum)
dscname=${PACKAGE}_${debver#*:}.dsc
dsc=$out/$dscname
if [ "${1:-}" = --check ]; then
    [ -f "$dsc" ] && [ -f "$out/build-time.txt" ] && [ "$(cat "$out/src.stamp" 2>/dev/null)" = "$stamp" ]
    exit
fi
if [ -f "$dsc" ] && [ -d "$src/debian" ] && [ "$(cat "$out/src.stamp" 2>/dev/null)" = "$stamp" ] &&
   [ "$(cat "$work/src.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$src"; exit 0
fi

"$top/scripts/fetch-base.sh" >&2
(cd "$dl" && sha256sum --quiet -c -) <<EOF || die "checksum mismatch in $dl; remove it and run 'make fetch'"
$DSC_SHA256  $DSC
$ORIG_SHA256  $ORIG
$DEBIAN_SHA256  $DEBIAN
EOF

echo "deb-src: preparing $PACKAGE $debver in $src" >&2
rm -rf "$work"
mkdir -p "$work"
ln "$dl/$ORIG" "$work/$ORIG" 2>/dev/null || cp "$dl/$ORIG" "$work/$ORIG"
dpkg-source --no-check -x "$dl/$DSC" "$src" >"$work/unpack.log" 2>&1 ||
    die "dpkg-source -x failed; see $work/unpack.log"

patch -s -p1 -F0 --no-backup-if-mismatch -d "$src" <"$LINE_PACKAGING" ||
    die "$packaging does not apply to debian/ of $VERSION; update it (docs/install.md)"

# Our series, after Debian's patches.
{ echo; echo "# qemu-iobatch: $LINE_REL/patches/series of qemu-iobatch"; } >>"$src/debian/patches/series"
for p in "${series[@]}"; do
    install -D -m 644 "$LINE_PATCHES/$p" "$src/debian/patches/iobatch/$p"
    echo "iobatch/$p" >>"$src/debian/patches/series"
done

# The package version that --version prints names the series too, as the
# in-tree build's does.  The directory where Debian keeps the modules of
# the running version across upgrades (SAVEMODDIR, /run/qemu/...) derives
# from the same variable, so it stays consistent with what QEMU looks for.
sed -i "s|^PKGVERSION = Debian \${DEB_VERSION}\$|PKGVERSION = Debian \${DEB_VERSION}, $seriesid|" \
    "$src/debian/rules"
grep -qxF "PKGVERSION = Debian \${DEB_VERSION}, $seriesid" "$src/debian/rules" ||
    die "debian/rules of $VERSION has no line 'PKGVERSION = Debian \${DEB_VERSION}' to name the series in; update scripts/deb-src.sh"

# The project maintains these packages: Maintainer names it, and Debian's
# team moves to XSBC-Original-Maintainer (as Ubuntu does with Debian's
# packages), in debian/control and in debian/control-in, from which
# debian/rules makes debian/control again (its ':debian:' lines).
maint=$(head -n 1 "$top/packaging/maintainer")
name_addr='^[^<>&|\\]+ <[^<>&|\\ @]+@[^<>&|\\ ]+>$'
[[ $maint =~ $name_addr ]] ||
    die "packaging/maintainer: '$maint' is not 'Name <address>'"
sed -i "s|^:debian:Maintainer: \(.*\)\$|:debian:Maintainer: $maint\n:debian:XSBC-Original-Maintainer: \1|" \
    "$src/debian/control-in"
sed -i "0,/^Maintainer: / s|^Maintainer: \(.*\)\$|Maintainer: $maint\nXSBC-Original-Maintainer: \1|" \
    "$src/debian/control"
for f in control control-in; do
    if ! grep -q "^\(:debian:\)\?Maintainer: $maint\$" "$src/debian/$f" ||
       ! grep -q "^\(:debian:\)\?XSBC-Original-Maintainer: " "$src/debian/$f"; then
        die "debian/$f of $VERSION has no Maintainer line to replace; update scripts/deb-src.sh"
    fi
done

# debian/changelog: one entry per fork release (the line's changelog, which
# a release adds its entry to) merged into Debian's history.  A build that
# is not a recorded release (the series changed since) gets an entry of its
# own on top, listing the series.
subject() {  # the Subject: of a git format-patch file, unfolded, without [PATCH]
    awk '/^Subject: /{ s = $0; sub(/^Subject: (\[PATCH[^]]*\] )?/, "", s)
                       while ((getline l) > 0 && l ~ /^[ \t]/) s = s l
                       print s; exit }' "$1"
}
top_entry=()
if ! grep -q "^$PACKAGE ($debver) " "$LINE_CHANGELOG"; then
    {
        echo "$PACKAGE ($debver) $LINE; urgency=medium"
        echo
        echo "  * qemu-iobatch build between releases (not in $changelog):"
        echo "    the series \"$seriesid\" on Debian's $VERSION"
        echo "    (debian/patches/iobatch/):"
        for p in "${series[@]}"; do echo "    - $(subject "$LINE_PATCHES/$p")"; done
        echo "  * Build profile pkg.qemu.x86only: the x86 system emulators alone."
        echo
        echo " -- $maint  $date"
    } >"$work/changelog.top"
    top_entry=("$work/changelog.top")
fi
python3 "$top/scripts/deb-changelog.py" "$debver" "$LINE_CHANGELOG" \
    "$src/debian/changelog" "${top_entry[@]}" >"$work/changelog" ||
    die "cannot merge $changelog into debian/changelog (above)"
mv "$work/changelog" "$src/debian/changelog"
[ "$(cd "$src" && dpkg-parsechangelog -S Version)" = "$debver" ] ||
    die "debian/changelog does not parse as version $debver"

(cd "$src" && dpkg-source --before-build .) >"$work/patches.log" 2>&1 || {
    tail -n 20 "$work/patches.log" >&2
    die "the series does not apply as quilt patches on $VERSION; see $work/patches.log"; }
(cd "$work" && dpkg-source -b "$(basename "$src")") >"$work/source.log" 2>&1 || {
    tail -n 20 "$work/source.log" >&2
    die "dpkg-source -b failed; see $work/source.log"; }
[ -f "$work/$dscname" ] || die "dpkg-source -b made no $work/$dscname"
echo "$stamp" >"$work/src.stamp"

# The source package beside the binaries, as the GPL wants.  A new source
# empties DEB_OUT, so that packages and build-time.txt there are of it.
if [ "$(cat "$out/src.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -f "$dsc" ]; then
    rm -rf "$out"
    mkdir -p "$out"
    debtar=$(sed -n 's/^ [0-9a-f]\{64\} [0-9]* \(.*\.debian\.tar\.[a-z0-9]*\)$/\1/p' "$work/$dscname" | head -n 1)
    [ -n "$debtar" ] || die "$work/$dscname lists no .debian.tar"
    cp "$work/$dscname" "$work/$debtar" "$out/"
    ln "$work/$ORIG" "$out/$ORIG" 2>/dev/null || cp "$work/$ORIG" "$out/$ORIG"
    echo "$stamp" >"$out/src.stamp"
fi
echo "deb-src: source package $dscname in $out" >&2
echo "$src"
