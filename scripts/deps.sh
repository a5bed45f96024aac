#!/bin/bash
# deps.sh: install from Debian's archive what building and testing the fork
# need.  Idempotent; when something is missing and we are not root, print the
# apt-get line to run and stop.
set -euo pipefail

PACKAGES=(
    # fetching and unpacking the base
    apt dpkg-dev xz-utils debian-archive-keyring git
    # the signed apt repository (make repo): apt-ftparchive, gpg, gpgv
    apt-utils gnupg gpgv
    # building QEMU
    gcc make ccache pkg-config ninja-build meson flex bison python3-venv
    libglib2.0-dev libpixman-1-dev libaio-dev liburing-dev libfdt-dev zlib1g-dev
    # firmware for -M pc / -M q35 (the dfsg source ships none)
    seabios ipxe-qemu qemu-system-data
    # tests: checkpatch.pl, cdrom-test (7.2: genisoimage; 10.0: xorrisofs),
    # io-channel tests, iotests
    perl genisoimage xorriso socat python3 file
    # the built-in guest of tests/guest (guest/build-guest.sh), benchmarks
    busybox-static fio dmsetup util-linux cpio kmod strace
    # benchmark plots (make bench)
    gnuplot-nox
    # the fuzzing build (make fuzz): clang with libFuzzer and the sanitizers
    clang libclang-rt-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
        missing+=("$p")
done
[ ${#missing[@]} -ne 0 ] || exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run as root:  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null ||
    { echo "deps: error: apt-get update failed; check the network and /etc/apt/sources.list" >&2; exit 1; }
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "deps: error: apt-get install ${missing[*]} failed (see above)" >&2; exit 1; }
