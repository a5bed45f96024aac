#!/bin/bash
# install.sh BUILDDIR PREFIX: install the fork's binaries into PREFIX/bin and
# its data files (firmware included) into PREFIX/share/qemu.  QEMU finds its
# data directory relative to its binary, so any PREFIX works.
set -euo pipefail

build=${1:?usage: install.sh BUILDDIR PREFIX}
prefix=${2:?usage: install.sh BUILDDIR PREFIX}
mkdir -p "$prefix/bin" "$prefix/share/qemu"
for b in qemu-system-x86_64 qemu-img qemu-io qemu-nbd storage-daemon/qemu-storage-daemon; do
    install -m 755 "$build/$b" "$prefix/bin/"
done
# -L copies the firmware that the build links from Debian's packages.
cp -RL "$build/qemu-bundle/usr/local/share/qemu/." "$prefix/share/qemu/"
rm -f "$prefix/share/qemu/trace-events-all"
echo "install: installed the fork into $prefix"
