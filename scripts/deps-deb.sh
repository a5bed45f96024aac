#!/bin/bash
# deps-deb.sh: install what 'make deb' needs.  With DEB_BUILDER=root (the
# default: scripts/deb.sh builds in a clean root) that is mmdebstrap and
# nothing else.  With DEB_BUILDER=host: dpkg-dev and the build dependencies
# of the fork's source package, as apt-get build-dep computes them from its
# .dsc for an arch-only build with the pkg.qemu.x86only profile (about 230
# packages), on a host that runs the line's Debian release.  Nothing when
# DEB_OUT (default: the line's, build/deb) has the packages of this source.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/line.sh"
die() { echo "deps-deb: error: $*" >&2; exit 1; }

"$top/scripts/deps.sh"
if "$top/scripts/deb-src.sh" --check; then
    exit 0
fi
case ${DEB_BUILDER:-root} in
    root)
        command -v mmdebstrap >/dev/null && exit 0
        [ "$(id -u)" -eq 0 ] || die "run as root: apt-get install mmdebstrap"
        echo "deps-deb: installing mmdebstrap (the packages are built in a clean root)"
        { apt-get -o DPkg::Lock::Timeout=600 update -q &&
          apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mmdebstrap; } \
            >"$top/build/deps-deb.log" 2>&1 || {
            tail -n 20 "$top/build/deps-deb.log" >&2
            die "apt-get install mmdebstrap failed; see build/deps-deb.log"; }
        exit 0 ;;
    host) line_on_host "make deps-deb DEB_BUILDER=host" ;;
    *) die "DEB_BUILDER=${DEB_BUILDER}: say root (a clean build root, the default) or host (this machine)" ;;
esac
src=$("$top/scripts/deb-src.sh")
dsc=$(ls "${DEB_OUT:-$LINE_BUILD/deb}"/*.dsc)
if (cd "$src" && dpkg-checkbuilddeps -B -P pkg.qemu.x86only) 2>/dev/null; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    (cd "$src" && dpkg-checkbuilddeps -B -P pkg.qemu.x86only) || true
    die "run as root: apt-get build-dep --arch-only -P pkg.qemu.x86only $dsc"
fi
echo "deps-deb: installing the build dependencies of $(basename "$dsc")"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null || die "apt-get update failed; check the network and /etc/apt/sources.list"
apt-get -o DPkg::Lock::Timeout=600 build-dep -y -q --no-install-recommends --arch-only -P pkg.qemu.x86only "$dsc" \
    >"$top/build/deps-deb.log" 2>&1 || {
    tail -n 20 "$top/build/deps-deb.log" >&2
    die "apt-get build-dep failed; see build/deps-deb.log"; }
(cd "$src" && dpkg-checkbuilddeps -B -P pkg.qemu.x86only) ||
    die "build dependencies still unmet after apt-get build-dep (see above)"
echo "deps-deb: build dependencies installed"
