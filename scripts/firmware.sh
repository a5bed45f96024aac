#!/bin/bash
# firmware.sh BUILDDIR: give a build the firmware that the dfsg source lacks,
# from Debian's packages: SeaBIOS and its VGA BIOSes (seabios), the iPXE
# option ROMs of the emulated NICs (ipxe-qemu), and qboot plus the x86 option
# ROMs built from this same QEMU version (qemu-system-data).  They are linked
# into the build's data directory, where in-tree binaries look first.
set -euo pipefail

out=${1:?usage: firmware.sh BUILDDIR}
data=$out/qemu-bundle/usr/local/share/qemu
# FIRMWARE_SEABIOS: another SeaBIOS than the host's (scripts/upstream.sh:
# trixie's, for the 10.0 builds)
seabios=${FIRMWARE_SEABIOS:-/usr/share/seabios}
sources=(
    "$seabios"/bios.bin "$seabios"/bios-256k.bin
    "$seabios"/vgabios*.bin
    /usr/lib/ipxe/qemu/*.rom
    /usr/share/qemu/qboot.rom /usr/share/qemu/bios-microvm.bin
    /usr/share/qemu/kvmvapic.bin /usr/share/qemu/linuxboot.bin
    /usr/share/qemu/linuxboot_dma.bin /usr/share/qemu/multiboot.bin
    /usr/share/qemu/multiboot_dma.bin /usr/share/qemu/pvh.bin
    /usr/share/qemu/keymaps
)
mkdir -p "$data"
for f in "${sources[@]}"; do
    [ -e "$f" ] || { echo "firmware: error: $f is missing; run 'make deps'" >&2; exit 1; }
    ln -sfn "$f" "$data/${f##*/}"
done
