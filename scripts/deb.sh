#!/bin/bash
# deb.sh: build the fork's Debian binary packages in build/deb from the
# source package of scripts/deb-src.sh, with Debian's own debian/rules and
# the pkg.qemu.x86only profile: qemu-system-x86, qemu-system-common,
# qemu-system-gui, qemu-block-extra and qemu-utils (plus their -dbgsym).
# Puts the apt preferences file packaging/qemu-iobatch.pref beside them and
# writes the build time to build/deb/build-time.txt.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-$(nproc)}
die() { echo "deb: error: $*" >&2; exit 1; }
PROFILE=pkg.qemu.x86only
WANT=(qemu-system-x86 qemu-system-common qemu-system-gui qemu-block-extra qemu-utils)

src=$("$top/scripts/deb-src.sh")
out=$(dirname "$src")
# deb-src.sh empties build/deb when the source package changes, so packages
# and a build-time.txt beside them are from this source.
install -m 644 "$top/packaging/qemu-iobatch.pref" "$out/qemu-iobatch.pref"
if [ -f "$out/build-time.txt" ] && ls "$out"/qemu-system-x86_*.deb >/dev/null 2>&1; then
    echo "deb: build/deb is up to date (built in $(cat "$out/build-time.txt"))"
    exit 0
fi
(cd "$src" && dpkg-checkbuilddeps -B -P "$PROFILE") ||
    die "build dependencies missing (above); run 'make deps-deb'"

rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out/build-time.txt"
echo "deb: building $(basename "$src") with $jobs jobs (log: $out/build.log)"
t0=$(date +%s)
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" \
    dpkg-buildpackage -B -us -uc -P"$PROFILE" -j"$jobs") >"$out/build.log" 2>&1 || {
    tail -n 40 "$out/build.log" >&2
    die "dpkg-buildpackage failed; see $out/build.log"; }
secs=$(( $(date +%s) - t0 ))

for p in "${WANT[@]}"; do
    ls "$out/${p}_"*.deb >/dev/null 2>&1 || die "dpkg-buildpackage made no $p package"
done
echo "$secs s ($((secs / 60)) min $((secs % 60)) s), $jobs jobs, $(nproc) cores, $(date -u +%F)" \
    >"$out/build-time.txt"
echo "deb: built in $(cat "$out/build-time.txt"):"
(cd "$out" && ls -1 *.deb *.dsc)
echo "deb: install with: apt-get install ./build/deb/{$(IFS=,; echo "${WANT[*]}")}_*.deb"
echo "deb: keep apt from replacing them: cp build/deb/qemu-iobatch.pref /etc/apt/preferences.d/"
