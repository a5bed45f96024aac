#!/bin/bash
# fuzz-build.sh: build QEMU's libFuzzer binary (qemu-fuzz-i386) from the
# fork's source (build/src/fork) into build/fuzz/qemu, with clang, ASan and
# UBSan, as docs/devel/fuzzing.rst recommends.  Only what the virtio-blk
# targets need is enabled: no UI, no tools, one target.  Configures once;
# later runs rebuild what changed (ccache makes a fresh build cheaper).
# FUZZ_SRC and FUZZ_OUT build another source tree into another directory
# (scripts/fuzz-planted.sh).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=${FUZZ_SRC:-$top/build/src/fork}
out=${FUZZ_OUT:-$top/build/fuzz/qemu}
jobs=${JOBS:-$(nproc)}

for tool in clang clang++ ninja meson; do
    command -v "$tool" >/dev/null ||
        { echo "fuzz-build: error: $tool not found; run 'make deps' first" >&2; exit 1; }
done
[ -x "$src/configure" ] ||
    { echo "fuzz-build: error: no QEMU source in $src; run 'make fork' first" >&2; exit 1; }

cc=clang cxx=clang++
if command -v ccache >/dev/null; then
    cc="ccache clang" cxx="ccache clang++"
fi
CONFIGURE_ARGS=(
    --cc="$cc" --cxx="$cxx"
    --target-list=i386-softmmu
    --enable-fuzzing
    --enable-sanitizers
    --without-default-features
    --enable-linux-aio
    --enable-linux-io-uring
    --with-git-submodules=ignore
)
want="$src ${CONFIGURE_ARGS[*]}"
if [ ! -f "$out/build.ninja" ] || [ "$(cat "$out/.configure-args" 2>/dev/null)" != "$want" ]; then
    rm -rf "$out"
    mkdir -p "$out"
    echo "fuzz-build: configuring in $out"
    (cd "$out" && "$src/configure" "${CONFIGURE_ARGS[@]}") >"$out.configure.log" 2>&1 ||
        { tail -n 30 "$out.configure.log" >&2
          echo "fuzz-build: error: configure failed; full log in $out.configure.log" >&2
          exit 1; }
    echo "$want" >"$out/.configure-args"
fi
echo "fuzz-build: building qemu-fuzz-i386 with $jobs jobs"
ninja -C "$out" -j "$jobs" qemu-fuzz-i386
"$top/scripts/firmware.sh" "$out"
