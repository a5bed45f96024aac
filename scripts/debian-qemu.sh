#!/bin/bash
# debian-qemu.sh: Debian's own qemu-system-x86 at the bookworm line's pinned
# version (lines/bookworm/base.pin; a binNMU of it, +bN, counts), from its
# .debs, unpacked into .cache/debian-qemu.  The guest cases migrate-debian-*
# (tests/guest/cases.py) migrate between it and the fork, as an admin who
# upgrades a cluster host by host does.  Installs the libraries it needs
# (root), and prints the path of a qemu-system-x86_64 wrapper that runs it
# with its own modules (QEMU_MODULE_DIR: Debian builds TCG as a module).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEBIAN_QEMU_DIR:-$ROOT/.cache/debian-qemu}
PIN=$(sed -n 's/^VERSION=//p' "$ROOT/lines/bookworm/base.pin")
[ -n "$PIN" ] || { echo "debian-qemu: no VERSION in lines/bookworm/base.pin" >&2; exit 1; }

die() { echo "debian-qemu: error: $*" >&2; exit 1; }

# The newest version of qemu-system-x86 that apt knows and that is the pin
# or a binNMU of it.
candidate() {
    apt-cache madison qemu-system-x86 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
        while read -r v; do
            case "$v" in "$PIN" | "$PIN"+b[0-9]*) echo "$v" ;; esac
        done | sort -V | tail -n 1
}

v=$(candidate)
if [ -z "$v" ] && [ "$(id -u)" -eq 0 ]; then
    apt-get update -q >/dev/null || die "apt-get update failed; check the network"
    v=$(candidate)
fi
[ -n "$v" ] || die "apt knows no qemu-system-x86 $PIN (or a binNMU of it):" \
    "run apt-get update, with bookworm in /etc/apt/sources.list"

bin=$OUT/root/usr/bin/qemu-system-x86_64
if [ "$(cat "$OUT/VERSION" 2>/dev/null)" != "$v" ] || [ ! -x "$bin" ]; then
    rm -rf "$OUT"
    mkdir -p "$OUT/debs" "$OUT/root"
    (cd "$OUT/debs" && apt-get download -q -o APT::Sandbox::User=root "qemu-system-x86=$v" "qemu-system-common=$v" \
        >/dev/null) || die "apt-get download qemu-system-x86=$v qemu-system-common=$v failed"
    for deb in "$OUT"/debs/*.deb; do
        dpkg-deb -x "$deb" "$OUT/root"
    done
    echo "$v" > "$OUT/VERSION"
fi

# The libraries the two packages depend on (the first of each alternative).
libs=$(for deb in "$OUT"/debs/*.deb; do dpkg-deb -f "$deb" Depends; done |
    tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:any//; s/ //g' | grep '^lib' | sort -u)
missing=()
for p in $libs; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
        missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
    [ "$(id -u)" -eq 0 ] ||
        die "Debian's QEMU needs ${missing[*]}: apt-get install -y ${missing[*]}"
    echo "debian-qemu: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi
notfound=$(ldd "$bin" | grep 'not found' || true)
[ -z "$notfound" ] || die "$bin lacks libraries: $notfound"

# QEMU looks for its firmware relative to where the binary is (a
# relocatable install: .cache/debian-qemu/root/usr/share/seabios, ...):
# there, the host's seabios, ipxe-qemu and qemu-system-data (deps.sh).
for d in /usr/share/seabios /usr/lib/ipxe; do
    [ -d "$d" ] || die "$d is missing: apt-get install seabios ipxe-qemu"
    [ -e "$OUT/root$d" ] || ln -s "$d" "$OUT/root$d"
done
[ -d /usr/share/qemu ] || die "/usr/share/qemu is missing: apt-get install qemu-system-data"
for f in /usr/share/qemu/*; do
    [ -e "$OUT/root$f" ] || ln -s "$f" "$OUT/root$f"
done

moddir=$(dirname "$(find "$OUT/root" -name 'accel-tcg-x86_64.so' | head -n 1)")
[ "$moddir" != . ] || die "no accel-tcg-x86_64.so in qemu-system-x86 or -common $v"
mkdir -p "$OUT/bin"
cat > "$OUT/bin/qemu-system-x86_64" <<EOF
#!/bin/sh
# Debian's qemu-system-x86 $v, unpacked by scripts/debian-qemu.sh
QEMU_MODULE_DIR=$moddir exec $bin "\$@"
EOF
chmod +x "$OUT/bin/qemu-system-x86_64"
"$OUT/bin/qemu-system-x86_64" -accel help | grep -qx tcg ||
    die "Debian's QEMU $v has no TCG accelerator: $("$OUT/bin/qemu-system-x86_64" -accel help 2>&1 | tr '\n' ' ')"
echo "$OUT/bin/qemu-system-x86_64"
