#!/bin/bash
# build.sh [--print-configure|--configure-only] NAME SRCDIR: configure (once)
# and build QEMU from SRCDIR in build/NAME.  base and fork share the one
# configure line below, so that the only difference between the two builds
# is the patch series (and the package version that --version prints).
# CONFIGURE_EXTRA adds options (not for base and fork).
#
# The line depends on the QEMU version of SRCDIR (its VERSION file), not on
# NAME: QEMU 7.2 (base, fork, tree, bisect, ...) and QEMU 10.0 (upstream,
# scripts/upstream.sh) do not accept the same options.  --print-configure
# prints the configure arguments that a build would use, one per line;
# --configure-only configures build/NAME as a build would and stops there.
# Neither builds anything: tests/configure.py (suite "configure" of make
# test) checks the line against the tree's 'configure --help' and runs it.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
mode=build
case ${1:-} in
    --print-configure) mode=print; shift ;;
    --configure-only) mode=configure; shift ;;
esac
usage="usage: build.sh [--print-configure|--configure-only] NAME SRCDIR"
name=${1:?$usage}
src=$(cd "${2:?$usage}" && pwd)
out=$top/build/$name
jobs=${JOBS:-$(nproc)}

[ -f "$src/VERSION" ] ||
    { echo "build: error: $src has no VERSION file: not a QEMU source tree" >&2; exit 1; }
qemu_version=$(cat "$src/VERSION")
major=${qemu_version%%.*}

# The options of every QEMU version we build, each for a reason:
CONFIGURE_ARGS=(
    # The one target that the fork ships and the tests and benchmarks run;
    # all of them would take many times as long to build.
    --target-list=x86_64-softmmu
    # qemu-img, qemu-io, qemu-nbd and qemu-storage-daemon: the iotests,
    # the smoke test and vblk-load need them.
    --enable-tools
    # aio=native and aio=io_uring are what the series is about: fail at
    # configure when libaio-dev or liburing-dev is missing, rather than
    # build without them (the default is "if available").
    --enable-linux-aio
    --enable-linux-io-uring
    # The storage daemon's vhost-user-blk export, for the
    # vhost-user-blk-pci qtests (tests/run.py QOS_DEVICES).
    --enable-vhost-user-blk-server
    # No sphinx: the manuals are not part of what we test or ship here.
    --disable-docs
)
case $major in
    7)
        # QEMU 7.2 only (gone from later configure scripts; 10.0's stops at
        # it with "unknown option"): our 7.2 trees (build/src/base,
        # build/src/fork, tree/) are git repositories without QEMU's
        # submodules, and with a .git 7.2's configure defaults to 'git
        # submodule update' of ui/keycodemapdb, which fails; the Debian
        # source already carries its content.
        CONFIGURE_ARGS+=(--with-git-submodules=ignore)
        ;;
    10)
        # Nothing more for 10.0 (scripts/upstream.sh adds
        # --disable-install-blobs through CONFIGURE_EXTRA).
        ;;
    *)
        echo "build: error: $src is QEMU $qemu_version; scripts/build.sh has configure lines for 7.x and 10.x only: add one for $major.x (check each option against '$src/configure --help')" >&2
        exit 1
        ;;
esac
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
# The Debian version is that of the pin of the line LINE (scripts/line.sh):
# bookworm for base, fork and tree; trixie for upstream (scripts/upstream.sh
# sets LINE), the trixie line's base.
. "$top/scripts/line.sh"
# shellcheck disable=SC1090  # base.pin: VAR=value lines, not followed here
base_version=$(. "$LINE_PIN"; echo "$VERSION")
case $name in
    base|upstream) pkgversion="Debian $base_version, unpatched" ;;
    fork|*/fork) pkgversion="$("$top/scripts/version.sh" series) on Debian $base_version" ;;
    tree|*-tree) pkgversion="qemu-iobatch development tree on Debian $base_version" ;;
    *) pkgversion="" ;;
esac
pkgversion=${PKGVERSION-$pkgversion}
if [ "$mode" = print ]; then
    printf '%s\n' "${CONFIGURE_ARGS[@]}" --with-pkgversion="$pkgversion"
    exit 0
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

[ "$mode" = build ] || exit 0

echo "build: building $name with $jobs jobs"
# EXTRA_PRODUCTS: more ninja targets, e.g. the qtests that a test run needs
# shellcheck disable=SC2206
PRODUCTS+=(${EXTRA_PRODUCTS:-})
ninja -C "$out" -j "$jobs" "${PRODUCTS[@]}"
"$top/scripts/firmware.sh" "$out" "$src"
