#!/bin/bash
# check-update.sh [--line NAME] [--pin] [--base FILE]: is there a newer
# Debian qemu source package than a line's pin, and does the line's series
# apply to it?  Without --line (and without --base), every line of lines/ in
# turn, then one verdict per line; --line NAME checks that line only.  Each
# line asks its own suites (the bookworm line: bookworm, bookworm-updates,
# bookworm-security; the trixie line: the same of trixie) through the private
# apt configuration of fetch-base.sh (scripts/apt-src.sh, one per line).
# When a newer version exists, downloads it into the line's build/check-update
# (bookworm: build/check-update; trixie: build/trixie/check-update), verifies
# its files against the archive's signed index, unpacks it, and applies the
# line's patches/series (and, for a line with packages, the patch to
# Debian's debian/ of make deb, packaging/x86only.patch) there, reporting
# per patch: clean, offset, fuzz or FAILED.  With --pin, rewrites the line's
# pin file (version, file names, sha256) when every patch applies without
# fuzz.  FILE defaults to lines/LINE/base.pin; with --base and no --line,
# the line is $LINE (default bookworm).
#
# The last line of each line's check is its verdict, "check-update: LINE:
# ...".  Exit status: 0 when nothing is newer or everything applies, 1 when
# a patch needs work, 2 on other errors; with every line, the worst of them.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: check-update.sh [--line NAME] [--pin] [--base FILE]" >&2; exit 2; }

pin=0 base='' line='' args=()
while [ $# -gt 0 ]; do
    case $1 in
        --pin) pin=1; args+=(--pin) ;;
        --base) [ $# -ge 2 ] || usage; base=$2; shift ;;
        --line) [ $# -ge 2 ] || usage; line=$2; shift ;;
        *) usage ;;
    esac
    shift
done

# Every line: each in a run of its own (one line's error does not stop the
# others), then the verdicts together.
if [ -z "$line" ] && [ -z "$base" ]; then
    . "$top/scripts/line.sh"
    mapfile -t lines < <(all_lines)
    [ ${#lines[@]} -gt 0 ] || { echo "check-update: error: no lines/*/base.pin" >&2; exit 2; }
    worst=0 verdicts=()
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    for l in "${lines[@]}"; do
        echo "check-update: ==== line $l (lines/$l/base.pin)"
        rc=0
        LINE=$l "$BASH" "$0" --line "$l" "${args[@]}" 2>&1 | tee "$out" || rc=${PIPESTATUS[0]}
        v=$(grep "^check-update: $l: " "$out" | tail -n 1)
        verdicts+=("${v:-check-update: $l: error: no verdict (exit status $rc; see above)}")
        [ "$rc" -le "$worst" ] || worst=$rc
    done
    echo "check-update: ==== the ${#lines[@]} lines:"
    printf '%s\n' "${verdicts[@]}"
    exit "$worst"
fi

[ -z "$line" ] || export LINE=$line
. "$top/scripts/line.sh"
. "$top/scripts/groups.sh"
. "$top/scripts/apt-src.sh"
die() { echo "check-update: $LINE: error: $*" >&2; exit 2; }
verdict() { echo "check-update: $LINE: $*"; }

base=${base:-$LINE_PIN}
[ -f "$base" ] || die "no pin file $base"
PACKAGE=$(. "$base"; echo "${PACKAGE:-}")
PINNED=$(. "$base"; echo "${VERSION:-}")
[ -n "$PACKAGE" ] && [ -n "$PINNED" ] || die "$base has no PACKAGE= or no VERSION= line"
check_series || die "fix $LINE_REL/patches/series"

echo "check-update: asking the archive for $PACKAGE in ${LINE_SUITES[*]/%/,} $LINE_SECURITY_SUITE"
apt_src_update || die "apt-get update failed (network?); see $APT_DIR/update.log"
apt-cache "${APT_OPTS[@]}" madison "$PACKAGE" | awk -F' *[|] *' '/Sources$/ {print $2 "\t" $3}' \
    >"$APT_DIR/madison" || true
[ -s "$APT_DIR/madison" ] || die "the archive lists no $PACKAGE source package; see $APT_DIR/update.log"
newest=
while IFS=$'\t' read -r v where; do
    echo "check-update:   $v  ($where)"
    if [ -z "$newest" ] || dpkg --compare-versions "$v" gt "$newest"; then newest=$v; fi
done <"$APT_DIR/madison"

if ! dpkg --compare-versions "$newest" gt "$PINNED"; then
    echo "check-update: nothing newer: the newest is $newest, $(basename "$base") pins $PINNED"
    verdict "nothing newer than $PINNED (${base#"$top"/})"
    exit 0
fi
echo "check-update: $newest is newer than the pinned $PINNED"

# The index entry of the new version: its files and their sha256, from the
# Sources index that apt verified against the archive's signed Release.
apt-cache "${APT_OPTS[@]}" showsrc "$PACKAGE" | awk -v v="$newest" '
    /^Package: / { keep = 0 } $0 == "Version: " v { keep = 1 }
    /^[^ ]/ { in_sha = ($0 == "Checksums-Sha256:") ; next }
    keep && in_sha { print $1 "  " $3 }' | sort -u >"$APT_DIR/new.sha256"
dsc=$(awk '/\.dsc$/ {print $2}' "$APT_DIR/new.sha256")
[ -n "$dsc" ] || die "no .dsc for $PACKAGE $newest in the index"

work=$LINE_BUILD/check-update
rm -rf "$work"
mkdir -p "$work/dl"
# A file that make fetch has already (.cache/download) with the index's
# sha256 is linked, not downloaded again; apt-get source skips it.
while read -r sum f; do
    c=$top/.cache/download/$f
    if [ -f "$c" ] && [ "$(sha256sum <"$c" | cut -d' ' -f1)" = "$sum" ]; then
        ln "$c" "$work/dl/$f" 2>/dev/null || cp "$c" "$work/dl/$f"
    fi
done <"$APT_DIR/new.sha256"
echo "check-update: downloading $PACKAGE=$newest into $work"
(cd "$work/dl" && apt-get "${APT_OPTS[@]}" -q source --download-only "$PACKAGE=$newest") \
    >"$work/source.log" 2>&1 || die "apt-get source $PACKAGE=$newest failed; see $work/source.log"
(cd "$work/dl" && sha256sum --quiet -c "$APT_DIR/new.sha256") ||
    die "the downloaded files do not match the archive's index (above); not trusting them"
dpkg-source --no-check -x "$work/dl/$dsc" "$work/src" >"$work/unpack.log" 2>&1 ||
    die "dpkg-source -x failed; see $work/unpack.log"
echo "check-update: verified against the archive's index and unpacked in $work/src"

# apply NAME FILE: dry run first (fuzz allowed, to tell it apart), then apply.
n_clean=0 n_fuzz=0 n_fail=0
apply() {
    local name=$1 file=$2 out status
    if out=$(patch -p1 -N -F2 --dry-run -d "$work/src" <"$file" 2>&1); then
        patch -s -p1 -N -F2 --no-backup-if-mismatch -d "$work/src" <"$file" >/dev/null
        if grep -q 'with fuzz' <<<"$out"; then status=fuzz n_fuzz=$((n_fuzz + 1))
        elif grep -q 'offset' <<<"$out"; then status=offset n_clean=$((n_clean + 1))
        else status=clean n_clean=$((n_clean + 1)); fi
    else
        status=FAILED n_fail=$((n_fail + 1))
    fi
    printf 'check-update:   %-7s %s\n' "$status" "$name"
    if [ "$status" = FAILED ] || [ "$status" = fuzz ]; then
        { grep -iE 'failed|fuzz|reversed|ignored|can.t find|malformed' <<<"$out" || true; } |
            sed 's/^/check-update:           /'
    fi
}
echo "check-update: applying the $LINE series to $newest:"
for g in "${PATCH_GROUPS[@]}"; do
    while read -r p; do apply "$LINE_REL/patches/$p" "$LINE_PATCHES/$p"; done < <(series_in "$g")
done
if [ -n "$LINE_PACKAGING" ]; then
    apply "${LINE_PACKAGING#"$top"/}" "$LINE_PACKAGING"
fi
echo "check-update: $n_clean clean, $n_fuzz with fuzz, $n_fail failed"

if [ $((n_fuzz + n_fail)) -ne 0 ]; then
    echo "check-update: refresh the patches marked fuzz or FAILED on $newest before pinning it:"
    echo "check-update: see 'Moving to a new Debian version' in docs/patch-workflow.md"
    [ "$pin" -eq 0 ] || echo "check-update: $(basename "$base") not changed"
    verdict "$newest is newer than $PINNED; $((n_fuzz + n_fail)) patch(es) need work ($n_fuzz with fuzz, $n_fail failed)"
    exit 1
fi
if [ "$pin" -eq 1 ]; then
    sha() { awk -v f="$1" '$2 == f {print $1}' "$APT_DIR/new.sha256"; }
    orig=$(awk '$2 ~ /\.orig\.tar\./ {print $2}' "$APT_DIR/new.sha256")
    deb=$(awk '$2 ~ /\.debian\.tar\./ {print $2}' "$APT_DIR/new.sha256")
    [ -n "$orig" ] && [ -n "$deb" ] || die "$dsc is not a 3.0 (quilt) source package"
    awk '/^[A-Z_]+=/ {exit} {print}' "$base" >"$work/pin"
    cat >>"$work/pin" <<EOF
PACKAGE=$PACKAGE
VERSION=$newest
DSC=$dsc
DSC_SHA256=$(sha "$dsc")
ORIG=$orig
ORIG_SHA256=$(sha "$orig")
DEBIAN=$deb
DEBIAN_SHA256=$(sha "$deb")
EOF
    mv "$work/pin" "$base"
    mkdir -p "$top/.cache/download"
    for f in "$dsc" "$orig" "$deb"; do   # not those linked from there above
        [ "$work/dl/$f" -ef "$top/.cache/download/$f" ] || cp "$work/dl/$f" "$top/.cache/download/"
    done
    if [ "$LINE" = "$DEFAULT_LINE" ]; then
        echo "check-update: $(basename "$base") now pins $newest; next: make fork test, then commit it"
    else
        echo "check-update: $(basename "$base") now pins $newest; next: make check-patches$LINE_MAKE and make upstream (the line's base build), then commit it"
    fi
    if [ -n "$LINE_PACKAGING" ]; then
        echo "check-update: then make deb repo: the package version follows $LINE_REL/base.pin (docs/install.md#versions)"
    fi
    verdict "$newest is newer than $PINNED; the series applies ($n_clean clean or offset); ${base#"$top"/} now pins $newest"
    exit 0
fi
verdict "$newest is newer than $PINNED; the series applies ($n_clean clean or offset): 'make check-update$LINE_MAKE CHECKUPDATEFLAGS=--pin' pins it"
