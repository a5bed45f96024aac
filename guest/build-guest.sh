#!/bin/bash
# Build (or reuse) the built-in test guest: a bookworm kernel and an
# uncompressed initramfs with busybox, fio, dmsetup, blkdiscard, the virtio
# and dm modules, guest/init and smc-race (guest/smc-race.c).  Prints the guest directory (which holds
# vmlinuz and initrd.cpio) on stdout.  Cached under .cache/guest/KEY, KEY being
# a hash of the package versions, this script and guest/init.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cache=${GUEST_CACHE:-$root/.cache/guest}
host_pkgs=(busybox-static fio dmsetup util-linux cpio xz-utils kmod gcc libc6-dev)
log() { echo "build-guest: $*" >&2; }

missing=()
for p in "${host_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) != 0 ]]; then
        echo "build-guest: missing packages; run: apt-get install -y ${missing[*]}" >&2; exit 1
    fi
    log "installing ${missing[*]}"
    apt-get install -y -q "${missing[@]}" >&2 || {
        apt-get update -q >&2; apt-get install -y -q "${missing[@]}" >&2; } || {
        echo "build-guest: FAILED: apt-get install -y ${missing[*]}" >&2; exit 1; }
fi

# The kernel package behind the linux-image-amd64 metapackage.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [[ -z $kpkg ]]; then apt-get update -q >&2
    kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
[[ -n $kpkg ]] || { echo "build-guest: cannot resolve linux-image-amd64 (apt-get update?)" >&2; exit 1; }
kver=$(apt-cache policy "$kpkg" | awk '/Candidate:/{print $2}')

key=$( { echo "$kpkg=$kver"
         dpkg-query -W "${host_pkgs[@]}" libdevmapper1.02.1 libc6
         cat "$0" "$here/init" "$here/lib.sh" "$here/smc-race.c"; } | sha256sum | cut -c1-16)
out=$cache/$key
if [[ -f $out/initrd.cpio && -f $out/vmlinuz ]]; then echo "$out"; exit 0; fi

log "building guest $key ($kpkg $kver)"
work=$(mktemp -d "${TMPDIR:-/tmp}/guest-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"   # apt-get download runs as _apt
(cd "$work" && apt-get download -q "$kpkg=$kver" >&2)
dpkg-deb -x "$work"/"$kpkg"_*.deb "$work/k"
# A merged-/usr kernel package (trixie's) has its modules in /usr/lib/modules.
if [[ ! -d $work/k/lib/modules && -d $work/k/usr/lib/modules ]]; then
    mkdir -p "$work/k/lib"; ln -s ../usr/lib/modules "$work/k/lib/modules"
fi
uname_r=$(ls "$work/k/lib/modules/")
moddir=$work/k/lib/modules/$uname_r
[[ -f $moddir/modules.dep ]] || depmod -b "$work/k" "$uname_r"   # the package leaves it to postinst

# Modules we want and their dependency closure, in load order (deps first).
want=(virtio_pci virtio_blk virtio_scsi sd_mod dm-mod dm-linear dm-stripe qemu_fw_cfg)
declare -A seen=()
order=()
resolve() { # $1 = path relative to moddir as in modules.dep
    local m=$1 d
    [[ -n ${seen[$m]:-} ]] && return; seen[$m]=1
    for d in $(awk -v m="$m:" '$1==m{$1=""; print}' "$moddir/modules.dep"); do resolve "$d"; done
    order+=("$m")
}
for w in "${want[@]}"; do
    rel=$(awk -F: -v a="/${w//-/_}.ko" -v b="/${w//_/-}.ko" \
        '{p=$1; sub(/\.(xz|zst|gz)$/,"",p)} substr(p,length(p)-length(a)+1)==a || substr(p,length(p)-length(b)+1)==b {print $1; exit}' \
        "$moddir/modules.dep")
    if [[ -z $rel ]]; then
        if grep -qE "/${w//-/_}\.ko|/${w//_/-}\.ko" "$moddir/modules.builtin"; then log "$w is built in"; continue; fi
        log "module $w not present (skipped)"; continue
    fi
    resolve "$rel"
done

r=$work/root
mkdir -p "$r"/{bin,sbin,dev,proc,sys,tmp,lib/modules,lib64,usr/lib,etc,mnt}
mknod -m 600 "$r/dev/console" c 5 1
mknod -m 666 "$r/dev/null" c 1 3
cp /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [[ -e $r/bin/$a ]] || ln -s busybox "$r/bin/$a"; done
: > "$r/lib/modules/load.list"
for m in "${order[@]}"; do
    b=$(basename "$m"); b=${b%.xz}; b=${b%.zst}; b=${b%.gz}
    case $m in
        *.xz) xz -dc "$moddir/$m" > "$r/lib/modules/$b" ;;
        *.zst) zstd -dc "$moddir/$m" > "$r/lib/modules/$b" ;;
        *.gz) gzip -dc "$moddir/$m" > "$r/lib/modules/$b" ;;
        *) cp "$moddir/$m" "$r/lib/modules/$b" ;;
    esac
    echo "$b" >> "$r/lib/modules/load.list"
done
log "modules: $(tr '\n' ' ' < "$r/lib/modules/load.list")"

# Binaries and their shared-library closure (as ldd resolves it on the host).
for bin in /usr/bin/fio /usr/sbin/dmsetup /usr/sbin/blkdiscard; do
    rm -f "$r/bin/$(basename "$bin")"   # replaces busybox's applet link
    cp "$bin" "$r/bin/"
    ldd "$bin" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | while read -r lib; do
        [[ -e $r$lib ]] && continue
        mkdir -p "$r$(dirname "$lib")"; cp -L "$lib" "$r$lib"
    done
done
# The guest's test of cross-modifying code (the smc-race case), static.
gcc -O2 -Wall -Werror -static -pthread -o "$r/bin/smc-race" "$here/smc-race.c"
# fio dlopen()s its ioengines; none we use needs it, but keep the glibc bits
# that fio reads at start.
install -m 0755 "$here/init" "$r/init"
install -m 0644 "$here/lib.sh" "$r/lib/wl.sh"
echo "$uname_r" > "$r/etc/kernel-release"

mkdir -p "$out.tmp"
cp "$work/k/boot/vmlinuz-$uname_r" "$out.tmp/vmlinuz"
(cd "$r" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) > "$out.tmp/initrd.cpio"
rm -rf "$out"; mv "$out.tmp" "$out"
ln -sfn "$key" "$cache/current"
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +   # old guests
log "guest ready: $out ($(du -sh "$out/initrd.cpio" | cut -f1) initramfs)"
echo "$out"
