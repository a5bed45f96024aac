#!/bin/bash
# build.sh NAME SRCDIR: configure (once) and build QEMU from SRCDIR in
# build/NAME.  base and fork share the one configure line below, so that the
# only difference between the two builds is the patch series; the comparison
# build of upstream QEMU (scripts/upstream.sh) uses it too.  CONFIGURE_EXTRA
# adds options (not for base and fork).
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
# The same line for a newer QEMU (make upstream, scripts/upstream.sh):
# --with-git-submodules went away after 7.2; its successor that also keeps
# the build from fetching anything is --disable-download.
if ! grep -q -e '--with-git-submodules' "$src/configure"; then
    for i in "${!CONFIGURE_ARGS[@]}"; do
        [ "${CONFIGURE_ARGS[$i]}" != --with-git-submodules=ignore ] ||
            CONFIGURE_ARGS[$i]=--disable-download
    done
fi
if command -v ccache >/dev/null; then
    CONFIGURE_ARGS+=(--cc="ccache cc" --cxx="ccache c++")
fi
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
    (cd "$out" && "$src/configure" "${CONFIGURE_ARGS[@]}") >"$out.configure.log" 2>&1 ||
        { tail -n 30 "$out.configure.log" >&2
          echo "build: error: configure of $name failed; full log in $out.configure.log" >&2
          exit 1; }
    echo "$want" >"$out/.configure-args"
fi

echo "build: building $name with $jobs jobs"
ninja -C "$out" -j "$jobs" "${PRODUCTS[@]}"
"$top/scripts/firmware.sh" "$out" "$src"
