#!/bin/bash
# install.sh BUILDDIR PREFIX: install the fork's binaries into PREFIX/bin and
# its data files (firmware included) into PREFIX/share/qemu.  QEMU finds its
# data directory relative to its binary, so any PREFIX works.
# install.sh --uninstall PREFIX: remove exactly what it installed there.
#
# 'make install' gives PREFIX=/opt/qemu-iobatch: a prefix of its own, so
# that the fork's qemu-img and friends do not shadow Debian's in /usr/bin
# (as /usr/local/bin would, first in PATH).  PREFIX must be absolute;
# DESTDIR (environment) is prepended to every path written, for staging.
#
# What it installs is listed in PREFIX/share/qemu-iobatch/manifest, a line
# per path, as installed (without DESTDIR): "file PATH" for each file,
# "dir PATH" for each directory it created, parents first (the prefix too,
# when it was not there).  --uninstall reads it, removes the files, then the
# directories it created that are empty, deepest first, and last the
# manifest; without a manifest it refuses and removes nothing.  Installing
# again over an earlier install takes that one away first; a file that is
# already there and not in the manifest (someone else's) stops it before
# anything is written.
set -euo pipefail

die() { echo "install: error: $*" >&2; exit 1; }
usage() { echo "usage: install.sh BUILDDIR PREFIX | install.sh --uninstall PREFIX" >&2; exit 2; }
destdir=${DESTDIR:-}
destdir=${destdir%/}

mode=install
if [ "${1:-}" = --uninstall ]; then
    mode=uninstall
    [ $# -eq 2 ] || usage
    prefix=$2
else
    [ $# -eq 2 ] || usage
    build=$1 prefix=$2
fi
[[ $prefix == /* ]] || die "PREFIX must be an absolute path, not '$prefix'"
prefix=${prefix%/}
[ -n "$prefix" ] || die "PREFIX=/ would scatter the fork over the system: give a prefix of its own (default /opt/qemu-iobatch)"
MANIFEST_REL=share/qemu-iobatch/manifest
manifest=$destdir$prefix/$MANIFEST_REL

# read_manifest: check every line of the manifest and print it.  Files
# must lie under the prefix; directories under it, or be the prefix or one
# of its parents (which install created when they were missing).
read_manifest() {
    local kind path
    while read -r kind path; do
        case $kind in
            file) [[ $path == "$prefix"/* ]] || die "$manifest lists $path, which is not under $prefix: not touching it" ;;
            dir) [[ $path == "$prefix"/* || $prefix/ == "$path"/* || $path == "$prefix" ]] ||
                    die "$manifest lists the directory $path, outside $prefix: not touching it" ;;
            *) die "$manifest has a line that is not 'file PATH' or 'dir PATH': '$kind $path'" ;;
        esac
        [[ /$path/ != */../* && /$path/ != */./* ]] || die "$manifest lists $path, with . or ..: not touching it"
        printf '%s %s\n' "$kind" "$path"
    done <"$manifest"
}

# uninstall: remove what the manifest lists (quiet: QUIET=1).
uninstall() {
    local lines kind path dirs=() kept=() n=0 i
    [ -f "$manifest" ] || die "no $manifest: nothing was installed into ${destdir:+DESTDIR=$destdir }$prefix by 'make install' (give the PREFIX and DESTDIR it was installed with)"
    lines=$(read_manifest) || exit 1
    while read -r kind path; do
        [ -n "$kind" ] || continue
        if [ "$kind" = file ]; then
            rm -f -- "$destdir$path"
            n=$((n + 1))
        else
            dirs+=("$path")
        fi
    done <<<"$lines"
    rm -f -- "$manifest"
    for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
        if [ -d "$destdir${dirs[i]}" ] && ! rmdir -- "$destdir${dirs[i]}" 2>/dev/null; then
            kept+=("$destdir${dirs[i]}")
        fi
    done
    [ "${QUIET:-0}" = 1 ] && return 0
    echo "uninstall: removed $n files and the directories install made under $destdir$prefix"
    if [ ${#kept[@]} -gt 0 ]; then
        echo "uninstall: kept, as they hold files install did not put there: ${kept[*]}"
    fi
}

if [ "$mode" = uninstall ]; then
    uninstall
    exit 0
fi

# -- install ------------------------------------------------------------------
data=$build/qemu-bundle/usr/local/share/qemu
bins=(qemu-system-x86_64 qemu-img qemu-io qemu-nbd storage-daemon/qemu-storage-daemon)
for b in "${bins[@]}"; do
    [ -x "$build/$b" ] || die "$build has no $b: build the fork first (make fork)"
done
[ -d "$data" ] || die "$build has no $data: build the fork first (make fork)"

# What goes where: "SOURCE<TAB>PATH", PATH as installed.  -L: the firmware
# that the build links from Debian's packages is copied, not linked.
# trace-events-all is the build's, for its own runs only.
plan=()
for b in "${bins[@]}"; do
    plan+=("$build/$b"$'\t'"$prefix/bin/${b##*/}")
done
while IFS= read -r -d '' f; do
    f=${f#./}
    [ "$f" != trace-events-all ] || continue
    plan+=("$data/$f"$'\t'"$prefix/share/qemu/$f")
done < <(cd "$data" && find -L . -type f -print0 | sort -z)

# Files that are there already must be ours (an earlier install's).
declare -A ours=()
if [ -f "$manifest" ]; then
    lines=$(read_manifest) || exit 1
    while read -r kind path; do
        [ "$kind" != file ] || ours[$path]=1
    done <<<"$lines"
fi
for entry in "${plan[@]}"; do
    path=${entry#*$'\t'}
    if [ -e "$destdir$path" ] || [ -L "$destdir$path" ]; then
        [ -n "${ours[$path]:-}" ] ||
            die "$destdir$path is there already and was not installed by 'make install' (no manifest lists it): not overwriting it; choose another PREFIX (default /opt/qemu-iobatch)"
    fi
done
if [ -f "$manifest" ]; then
    QUIET=1 uninstall
fi

# mkdirs DIR: create DIR and its missing parents, each listed in the manifest.
mkdirs() {
    local d=$1 missing=()
    while [ "$d" != / ] && [ ! -d "$destdir$d" ]; do
        missing=("$d" "${missing[@]}")
        d=$(dirname "$d")
    done
    for d in "${missing[@]}"; do
        mkdir -- "$destdir$d"
        echo "dir $d" >>"$manifest"
    done
}

# The manifest first, so that an install that fails halfway can be undone.
mdir=$(dirname "$prefix/$MANIFEST_REL")
missing=()
d=$mdir
while [ "$d" != / ] && [ ! -d "$destdir$d" ]; do
    missing=("$d" "${missing[@]}")
    d=$(dirname "$d")
done
mkdir -p -- "$destdir$mdir"
: >"$manifest"
for d in "${missing[@]}"; do
    echo "dir $d" >>"$manifest"
done

n=0
for entry in "${plan[@]}"; do
    src=${entry%%$'\t'*} path=${entry#*$'\t'}
    mkdirs "$(dirname "$path")"
    case $path in
        "$prefix"/bin/*) install -m 755 -- "$src" "$destdir$path" ;;
        *) install -m 644 -- "$src" "$destdir$path" ;;
    esac
    echo "file $path" >>"$manifest"
    n=$((n + 1))
done
echo "install: installed the fork into $destdir$prefix ($n files; bin/qemu-system-x86_64 and the tools)"
echo "install: 'make uninstall${destdir:+ DESTDIR=$destdir} PREFIX=$prefix' removes them again ($prefix/$MANIFEST_REL lists them)"
