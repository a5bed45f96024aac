#!/bin/bash
# upstream.sh [--fetch-only | --print-configure | --configure-only NAME |
# --build NAME SRCDIR]:
# the trixie line's base build, in build/upstream (make upstream): Debian
# trixie's QEMU 10.0 as pinned in lines/trixie/base.pin, unpatched.  No patch
# of ours is applied to it; bench/run.py --upstream (or --builds ...
# upstream) and bench/profile.py measure it beside base and fork, and it is
# the stock 10.0 that the trixie line's fork will be measured against.
#
# What it fetches:
#   - the pinned source, by scripts/fetch-base.sh with LINE=trixie, exactly
#     as 'make fetch LINE=trixie' does (the code path of the bookworm pin):
#     apt-get source through the line's private apt configuration
#     (.cache/apt/trixie), the .dsc and both tarballs checked against the
#     pin's sha256, unpacked into build/trixie/src/base (a git tree, tag
#     "base"; nothing is unpacked on a mismatch);
#   - trixie's meson .deb, through a private apt configuration of its own
#     under .cache/upstream/apt (binary packages of trixie and
#     trixie-security), unpacked with dpkg-deb -x under .cache/upstream and
#     put first in PATH/PYTHONPATH for this build only (10.0 needs meson >=
#     1.5; bookworm has 1.0.1).  Nothing is installed.  The meson is the
#     newest of trixie when first fetched; UPSTREAM_REFRESH=1 asks the
#     archive again;
#   - trixie's seabios .deb, the same way, unpacked under
#     .cache/upstream/seabios: scripts/firmware.sh links its BIOS into the
#     10.0 builds (FIRMWARE_SEABIOS), the firmware a trixie host has
#     (10.0's cdrom-test hangs with bookworm's SeaBIOS 1.16.2).
# The machine's own apt sources and cache are untouched.  What is trusted
# for the meson, as with apt-get source: the Debian archive keys in
# /usr/share/keyrings/debian-archive-keyring.gpg (package
# debian-archive-keyring); apt-get update checks each suite's InRelease with
# them and the Packages index against its hashes, and apt-get download
# checks the .deb against the index.  The version and the sha256 of each
# file used are written to build/upstream.version.
#
# The build uses scripts/build.sh (with LINE=trixie, so that --version names
# the pinned Debian version: "Debian 1:10.0.x+ds-..., unpatched"), so its
# configure line is build.sh's line for a 10.x tree (that of base and fork
# without the 7.2-only --with-git-submodules=ignore), plus:
#   --disable-install-blobs  the +ds source has no firmware, and 10.0's
#                            meson setup fails on the missing files
#                            otherwise (Debian's own build passes it too);
#                            scripts/firmware.sh links Debian's firmware in,
#                            as for base and fork;
#   --disable-werror         the source is a git tree (fetch-base.sh), and
#                            10.0's configure turns -Werror on by default
#                            for a git checkout on Linux; the 7.2 builds and
#                            the unpinned tree that make upstream built
#                            before lines/ had no -Werror either.
# About 25 minutes on 2 cores, cold.
#
# The other modes build nothing; each fetches first if needed (about 15 s
# and 80 MB on a fresh clone, nothing once cached):
#   --fetch-only         the source in build/trixie/src/base and the meson.
#   --print-configure    the configure arguments of build/upstream, one per
#                        line (scripts/build.sh --print-configure).
#   --configure-only NAME
#                        configure build/NAME with the line and the meson of
#                        build/upstream, and stop (about a minute).
# tests/configure.py (suite "configure" of make test) uses them, so that a
# configure line that 10.0 rejects fails make test, not a 25-minute build.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
export LINE=trixie
. "$top/scripts/line.sh"
cache=$top/.cache/upstream
apt_dir=$cache/apt
dl=$cache/download
mesondir=$cache/meson
seabiosdir=$cache/seabios
src=$LINE_BUILD/src/base
info=$top/build/upstream.version

die() { echo "upstream: error: $*" >&2; exit 1; }

mode=build
case ${1:-} in
    "") ;;
    --fetch-only) mode=fetch ;;
    --print-configure) mode=print ;;
    --configure-only)
        mode=configure
        check_name=${2:?usage: upstream.sh --configure-only NAME}
        [ "$check_name" != upstream ] ||
            die "--configure-only upstream would replace build/upstream; give another NAME"
        ;;
    --build)
        # Another 10.0 tree (the trixie line's tree-trixie/, make
        # tree-build LINE=trixie) built exactly as upstream is, into
        # build/NAME
        mode=other
        other_name=${2:?usage: upstream.sh --build NAME SRCDIR}
        other_src=${3:?usage: upstream.sh --build NAME SRCDIR}
        [ "$other_name" != upstream ] ||
            die "--build upstream would replace build/upstream with another tree; give another NAME"
        [ -f "$other_src/VERSION" ] || die "$other_src is not a QEMU source tree (no VERSION)"
        ;;
    *) die "unknown argument '$1'; usage: upstream.sh [--fetch-only | --print-configure | --configure-only NAME | --build NAME SRCDIR]" ;;
esac
# --print-configure: only the arguments on stdout, the rest on stderr.
if [ "$mode" = print ]; then exec 3>&1 1>&2; fi

for tool in apt-get apt-cache dpkg-source dpkg-deb; do
    command -v "$tool" >/dev/null || die "$tool not found: this needs Debian 12 with dpkg-dev; run 'make deps'"
done
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    die "/usr/share/keyrings/debian-archive-keyring.gpg is missing; run 'make deps' (debian-archive-keyring)"

# The pinned source: fetched and verified as 'make fetch LINE=trixie' does.
"$top/scripts/fetch-base.sh" ||
    die "the trixie line's pinned source could not be fetched (above); run 'make upstream' again once that is fixed"
# shellcheck disable=SC1090  # the pin: VAR=value lines
. "$LINE_PIN"
qemu_version=$VERSION

apt_opts=(-o "Dir::State::Lists=$apt_dir/lists"
          -o "Dir::Cache=$apt_dir/cache"
          -o "Dir::Etc::SourceParts=$apt_dir/parts"
          -o "Dir::Etc::SourceList=/dev/null"
          -o "Dir::Etc::PreferencesParts=$apt_dir/prefs"
          -o "Dir::Etc::Preferences=/dev/null"
          -o "APT::Sandbox::User=root")

fetch_debs() {
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" \
             "$apt_dir/parts" "$apt_dir/prefs" "$dl"
    rm -f "$apt_dir/parts/trixie.sources"   # with deb-src, before lines/
    cat >"$apt_dir/parts/trixie-meson.sources" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    echo "upstream: updating the private trixie index of binary packages in $apt_dir"
    apt-get "${apt_opts[@]}" -q update >"$apt_dir/update.log" 2>&1 ||
        die "apt-get update failed (no network, or the archive is unreachable); see $apt_dir/update.log, then run 'make upstream' again"
    # A signature that does not verify is only a warning to apt-get update
    # (the suite is then left out), so look for it.
    if grep -Eq '^(W|E): .*(NO_PUBKEY|not signed|signature|EXPKEYSIG)' "$apt_dir/update.log"; then
        grep -E '^(W|E):' "$apt_dir/update.log" >&2
        die "the trixie index did not verify (see above); update debian-archive-keyring ('apt-get install debian-archive-keyring') and run 'make upstream' again"
    fi
    meson_version=$(apt-cache "${apt_opts[@]}" policy meson | sed -n 's/^ *Candidate: //p')
    if [ -z "$meson_version" ] || [ "$meson_version" = "(none)" ]; then
        die "no meson binary package in trixie's index (see $apt_dir/update.log)"
    fi
    seabios_version=$(apt-cache "${apt_opts[@]}" policy seabios | sed -n 's/^ *Candidate: //p')
    if [ -z "$seabios_version" ] || [ "$seabios_version" = "(none)" ]; then
        die "no seabios binary package in trixie's index (see $apt_dir/update.log)"
    fi
    echo "upstream: downloading meson=$meson_version and seabios=$seabios_version (.deb)"
    (cd "$dl" && apt-get "${apt_opts[@]}" -q download "meson=$meson_version" \
                                                      "seabios=$seabios_version") \
        >"$apt_dir/download.log" 2>&1 ||
        die "apt-get download of meson=$meson_version and seabios=$seabios_version failed; see $apt_dir/download.log"
}

# Ask the archive for meson and seabios only when one of them is missing,
# or with UPSTREAM_REFRESH=1 (a newer meson then makes the build reconfigure).
meson_version=$(cat "$mesondir.stamp" 2>/dev/null || true)
seabios_version=$(cat "$seabiosdir.stamp" 2>/dev/null || true)
if [ -n "${UPSTREAM_REFRESH:-}" ] || [ -z "$meson_version" ] ||
   [ ! -f "$dl/meson_${meson_version#*:}_all.deb" ] || [ -z "$seabios_version" ] ||
   [ ! -f "$dl/seabios_${seabios_version#*:}_all.deb" ]; then
    fetch_debs
fi
meson_deb=$(ls "$dl"/meson_"${meson_version#*:}"_all.deb 2>/dev/null) ||
    die "apt-get download left no meson_${meson_version#*:}_all.deb in $dl"

if [ "$(cat "$mesondir.stamp" 2>/dev/null)" != "$meson_version" ] || [ ! -x "$mesondir/usr/bin/meson" ]; then
    rm -rf "$mesondir"
    dpkg-deb -x "$meson_deb" "$mesondir" || die "dpkg-deb -x $meson_deb failed"
    echo "$meson_version" >"$mesondir.stamp"
fi
if [ ! -x "$mesondir/usr/bin/meson" ] || [ ! -d "$mesondir/usr/lib/python3/dist-packages/mesonbuild" ]; then
    die "$meson_deb has no usr/bin/meson or mesonbuild; remove $mesondir and run 'make upstream' again"
fi
# trixie's SeaBIOS for the 10.0 builds, as a trixie host has it: with
# bookworm's (1.16.2), 10.0's cdrom-test hangs booting from an am53c974
# SCSI CD-ROM; with trixie's (1.16.3) it passes.  scripts/firmware.sh
# links it in (FIRMWARE_SEABIOS) instead of the host's.
seabios_deb=$dl/seabios_${seabios_version#*:}_all.deb
if [ "$(cat "$seabiosdir.stamp" 2>/dev/null)" != "$seabios_version" ] ||
   [ ! -f "$seabiosdir/usr/share/seabios/bios-256k.bin" ]; then
    rm -rf "$seabiosdir"
    dpkg-deb -x "$seabios_deb" "$seabiosdir" || die "dpkg-deb -x $seabios_deb failed"
    echo "$seabios_version" >"$seabiosdir.stamp"
fi
[ -f "$seabiosdir/usr/share/seabios/bios-256k.bin" ] ||
    die "$seabios_deb has no usr/share/seabios/bios-256k.bin; remove $seabiosdir and run 'make upstream' again"

mkdir -p "$(dirname "$info")"
{
    echo "qemu $qemu_version (QEMU $(cat "$src/VERSION")) pinned in $LINE_REL/base.pin, built with meson $meson_version from trixie, SeaBIOS $seabios_version from trixie"
    (cd "$top/.cache/download" && sha256sum "$DSC" "$ORIG" "$DEBIAN")
    (cd "$dl" && sha256sum "$(basename "$meson_deb")" "$(basename "$seabios_deb")")
} >"$info.tmp"
mv "$info.tmp" "$info"
if [ -e "$top/build/src/upstream" ]; then
    echo "upstream: note: build/src/upstream, the unpinned source that make upstream used before lines/, is no longer used; 'rm -rf build/src/upstream build/src/upstream.stamp build/src/qemu_10.0.*.orig.tar.*' frees its space"
fi

# build.sh with trixie's meson and the options of this build, in every mode.
build_sh() {
    PATH=$mesondir/usr/bin:$PATH \
    PYTHONPATH=$mesondir/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH} \
    FIRMWARE_SEABIOS=$seabiosdir/usr/share/seabios \
    CONFIGURE_EXTRA="--disable-install-blobs --disable-werror ${CONFIGURE_EXTRA:-}" \
        "$top/scripts/build.sh" "$@"
}
case $mode in
    fetch)
        echo "upstream: QEMU $(cat "$src/VERSION") in $src, meson $meson_version in $mesondir"
        exit 0 ;;
    print) build_sh --print-configure upstream "$src" >&3; exit 0 ;;
    configure) build_sh --configure-only "$check_name" "$src"; exit 0 ;;
    other)
        echo "upstream: building $other_src (QEMU $(cat "$other_src/VERSION")) as build/upstream is built, into build/$other_name"
        build_sh "$other_name" "$other_src"
        exit 0 ;;
esac

echo "upstream: building QEMU $(cat "$src/VERSION") ($qemu_version, $LINE_REL/base.pin) with meson $meson_version into build/upstream"
start=$SECONDS
build_sh upstream "$src"
echo "upstream: build/upstream ready in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s ($(head -n 1 "$info"))"
