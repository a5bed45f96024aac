#!/bin/bash
# deb.sh: build the Debian binary packages of the fork's line LINE
# (scripts/line.sh) in DEB_OUT (default build/deb; trixie: build/trixie/deb)
# from the source package of scripts/deb-src.sh, with Debian's own
# debian/rules and the pkg.qemu.x86only profile: the line's
# LINE_DEB_PACKAGES (bookworm: qemu-system-x86, qemu-system-common,
# qemu-system-gui, qemu-block-extra and qemu-utils; trixie also
# qemu-system-modules-spice and -opengl), plus their -dbgsym.  The version is
# lines/LINE/base.pin's + "+iobatchN" (scripts/version.sh; IOBATCH_REV=N
# overrides N).  Puts the apt preferences
# file packaging/qemu-iobatch.pref beside the packages and writes the build
# time to DEB_OUT/build-time.txt.
#
# DEB_BUILDER says where the packages are built:
#   root  (the default) in a clean root of the line's Debian release made for
#         the build by mmdebstrap (scripts/deb-root.sh); the host gets
#         nothing but mmdebstrap;
#   host  on this machine, with the build dependencies that make deps-deb
#         installed here, through ccache when it is installed; the host must
#         run the line's Debian release.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
line_packaged "make deb"
jobs=${JOBS:-$(nproc)}
die() { echo "deb: error: $*" >&2; exit 1; }
PROFILE=pkg.qemu.x86only
out=${DEB_OUT:-$LINE_BUILD/deb}
export DEB_OUT=$out

if "$top/scripts/deb-src.sh" --check; then
    install -m 644 "$top/packaging/qemu-iobatch.pref" "$out/qemu-iobatch.pref"
    echo "deb: $out is up to date (built in $(cat "$out/build-time.txt"))"
    exit 0
fi
builder=${DEB_BUILDER:-root}
case $builder in
    root) ;;
    host) line_on_host "make deb DEB_BUILDER=host" ;;
    *) die "DEB_BUILDER=$builder: say root (a clean build root, the default) or host (this machine)" ;;
esac
src=$("$top/scripts/deb-src.sh")
work=$(dirname "$src")
install -m 644 "$top/packaging/qemu-iobatch.pref" "$out/qemu-iobatch.pref"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out/build-time.txt"
t0=$(date +%s)
if [ "$builder" = root ]; then
    dscs=("$out"/*.dsc)
    [ ${#dscs[@]} -eq 1 ] || die "$out: expected one .dsc, found: ${dscs[*]}"
    JOBS=$jobs "$top/scripts/deb-root.sh" "${dscs[0]}" "$out"
else
    (cd "$src" && dpkg-checkbuilddeps -B -P "$PROFILE") ||
        die "build dependencies missing (above); run 'make deps-deb DEB_BUILDER=host'"

    # ccache the way Debian's own builders use it: its compiler links first in
    # PATH (QEMU's configure runs 'cc': the link must be there).  deb-src.sh
    # unpacks every build in the same directory, so a rebuild with another
    # version hits the cache.
    if [ -d /usr/lib/ccache ]; then
        export PATH=/usr/lib/ccache:$PATH
    fi
    rm -f "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo
    echo "deb: building $(basename "$src") ($(cd "$src" && dpkg-parsechangelog -S Version))" \
         "with $jobs jobs (log: $out/build.log)"
    (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" \
        dpkg-buildpackage -B -us -uc -P"$PROFILE" -j"$jobs") >"$out/build.log" 2>&1 || {
        tail -n 40 "$out/build.log" >&2
        die "dpkg-buildpackage failed; see $out/build.log"; }
    mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out/"
fi
secs=$(( $(date +%s) - t0 ))

for p in "${LINE_DEB_PACKAGES[@]}"; do
    ls "$out/${p}_"*.deb >/dev/null 2>&1 || die "dpkg-buildpackage made no $p package"
done
echo "$secs s ($((secs / 60)) min $((secs % 60)) s), $jobs jobs, $(nproc) cores, $(date -u +%F), $builder" \
    >"$out/build-time.txt"
echo "deb: built in $(cat "$out/build-time.txt"):"
(cd "$out" && ls -1 *.deb *.dsc)
echo "deb: next, as root: 'make repo$LINE_MAKE' puts them into the signed apt repository REPO_DIR (docs/install.md)"
