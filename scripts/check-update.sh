#!/bin/bash
# check-update.sh [--pin] [--base FILE]: is there a newer Debian bookworm
# (or bookworm-security) qemu source package than the pinned base, and does
# our series apply to it?  Asks the archive through the private apt
# configuration of fetch-base.sh (scripts/apt-src.sh).  When a newer version
# exists, downloads it into build/check-update, verifies its files against the
# archive's signed index, unpacks it, and applies patches/series (and
# packaging/x86only.patch to its debian/) there, reporting per patch:
# clean, offset, fuzz or FAILED.  With --pin, rewrites the pin file (version,
# file names, sha256) when every patch applies without fuzz.
# FILE defaults to base.pin.  Exit status: 0 when nothing is newer or
# everything applies, 1 when a patch needs work, 2 on other errors.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/groups.sh"
. "$top/scripts/apt-src.sh"
die() { echo "check-update: error: $*" >&2; exit 2; }
usage() { echo "usage: check-update.sh [--pin] [--base FILE]" >&2; exit 2; }

pin=0 base=$top/base.pin
while [ $# -gt 0 ]; do
    case $1 in
        --pin) pin=1 ;;
        --base) [ $# -ge 2 ] || usage; base=$2; shift ;;
        *) usage ;;
    esac
    shift
done
[ -f "$base" ] || die "no pin file $base"
PACKAGE=$(. "$base"; echo "$PACKAGE")
PINNED=$(. "$base"; echo "$VERSION")
check_series || die "fix patches/series"

echo "check-update: asking the archive for $PACKAGE in bookworm, bookworm-updates, bookworm-security"
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

work=$top/build/check-update
rm -rf "$work"
mkdir -p "$work/dl"
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
echo "check-update: applying the series to $newest:"
for g in "${PATCH_GROUPS[@]}"; do
    while read -r p; do apply "patches/$p" "$top/patches/$p"; done < <(series_in "$g")
done
apply packaging/x86only.patch "$top/packaging/x86only.patch"
echo "check-update: $n_clean clean, $n_fuzz with fuzz, $n_fail failed"

if [ $((n_fuzz + n_fail)) -ne 0 ]; then
    echo "check-update: refresh the patches marked fuzz or FAILED on $newest before pinning it:"
    echo "check-update: see 'Moving to a new Debian version' in docs/patch-workflow.md"
    [ "$pin" -eq 0 ] || echo "check-update: $(basename "$base") not changed"
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
    cp "$work/dl/$dsc" "$work/dl/$orig" "$work/dl/$deb" "$top/.cache/download/"
    echo "check-update: $(basename "$base") now pins $newest; next: make fork test, then commit it"
    echo "check-update: then make deb repo: the package version follows base.pin (docs/install.md#versions)"
fi
