#!/bin/bash
# build.sh NAME SRCDIR: configure (once) and build QEMU from SRCDIR in
# build/NAME.  base and fork share the one configure line below, so that the
# only difference between the two builds is the patch series (and the
# package version that --version prints).  CONFIGURE_EXTRA adds options (not
# for base and fork).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: build.sh NAME SRCDIR}
src=$(cd "${2:?usage: build.sh NAME SRCDIR}" && pwd)
out=$top/build/$name
jobs=${JOBS:-$(nproc)}

CONFIGURE_ARGS=(
    --target-list=x86_64-softmmu
    --enable-tools
    --enable-linux-aio
    --enable-linux-io-uring
    --enable-vhost-user-blk-server
    --disable-docs
    --with-git-submodules=ignore
)
# Extra configure options for an experimental build, e.g.
# CONFIGURE_EXTRA=--enable-debug-defer-call scripts/build.sh dbg build/src/fork
# shellcheck disable=SC2206
CONFIGURE_ARGS+=(${CONFIGURE_EXTRA:-})
if command -v ccache >/dev/null; then
    CONFIGURE_ARGS+=(--cc="ccache cc" --cxx="ccache c++")
fi
# The package version, "QEMU emulator version 7.2.22 (PKGVERSION)": it names
# the build.  Not part of the reconfigure test below: when only it changes,
# 'meson configure' sets it, and ninja then regenerates qemu-version.h, which
# only the dozen files that print the version include (in 7.2 the package
# version reaches nothing else in a build without modules).
base_version=$(. "$top/base.pin"; echo "$VERSION")
case $name in
    base) pkgversion="Debian $base_version, unpatched" ;;
    fork) pkgversion="$("$top/scripts/version.sh" series) on Debian $base_version" ;;
    tree) pkgversion="qemu-iobatch development tree on Debian $base_version" ;;
    *) pkgversion="" ;;
esac
pkgversion=${PKGVERSION-$pkgversion}
PRODUCTS=(qemu-system-x86_64 qemu-img qemu-io qemu-nbd
          storage-daemon/qemu-storage-daemon)

for tool in ninja meson; do
    command -v "$tool" >/dev/null ||
        { echo "build: error: $tool not found; run 'make deps' first" >&2; exit 1; }
done

# Reconfigure only when the source, the configure line or the installed
# development packages change; ninja re-runs meson by itself when meson.build
# files change.  configure enables optional features (gtk, curl, rbd, ...)
# by what is installed, so the -dev packages are part of the configuration:
# base and fork must not differ by what was installed between their
# configure runs (make deps-deb installs hundreds of them).
devpkgs=$(dpkg-query -W -f '${db:Status-Abbrev}${Package}=${Version}\n' '*-dev' 2>/dev/null |
          sed -n 's/^ii *//p' | sort | sha256sum | cut -c1-16)
want="$src ${CONFIGURE_ARGS[*]} dev-packages:$devpkgs"
if [ ! -f "$out/build.ninja" ] || [ "$(cat "$out/.configure-args" 2>/dev/null)" != "$want" ]; then
    rm -rf "$out"
    mkdir -p "$out"
    echo "build: configuring $name from $src"
    (cd "$out" && "$src/configure" "${CONFIGURE_ARGS[@]}" --with-pkgversion="$pkgversion") \
        >"$out.configure.log" 2>&1 ||
        { tail -n 30 "$out.configure.log" >&2
          echo "build: error: configure of $name failed; full log in $out.configure.log" >&2
          exit 1; }
    echo "$want" >"$out/.configure-args"
elif [ "$(meson introspect --buildoptions "$out" |
          python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "pkgversion"))')" \
      != "$pkgversion" ]; then
    echo "build: package version of $name: $pkgversion"
    meson configure "$out" -Dpkgversion="$pkgversion" >/dev/null
fi

echo "build: building $name with $jobs jobs"
ninja -C "$out" -j "$jobs" "${PRODUCTS[@]}"
"$top/scripts/firmware.sh" "$out" "$src"
