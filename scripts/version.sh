#!/bin/bash
# version.sh series|rev|deb|apt: the versions that identify a build of the
# fork's line LINE (scripts/line.sh; rev and deb: a line with packages).
#   series  "qemu-iobatch, 35 patches, 3f9c2a1b4d5e": the number of patches
#           in lines/LINE/patches/series and the first 12 hex digits of the
#           sha256 of that series file followed by those patches, in order.
#           Needs no git.
#   rev     N of the Debian package revision +iobatchN: the number of commits
#           of this repository that changed lines/LINE/patches/ or the
#           line's packaging patch (LINE_PACKAGING: what goes into Debian's
#           source besides the pin), so that it grows whenever the series
#           changes.  Before lines/ the bookworm series was in patches/: the
#           commits that changed it there count too, and a commit that only
#           moved it, every file unchanged, does not.  IOBATCH_REV=N
#           overrides it.
#   deb     the Debian package version: the pin's VERSION + "+iobatch" + rev.
#   apt     the version of the package qemu-iobatch-apt (scripts/apt-pkg.sh):
#           "1.M", M the number of commits that changed its files
#           (APT_PATHS); IOBATCH_APT_REV=M overrides M.  Uncommitted changes
#           to them are not refused: scripts/repo.sh refuses a package of a
#           version it has already with other contents.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/groups.sh"
die() { echo "version: error: $*" >&2; exit 1; }
REV_PATHS=("$LINE_REL/patches" ${LINE_PACKAGING:+"${LINE_PACKAGING#"$top"/}"})
APT_PATHS=(packaging/qemu-iobatch.pref packaging/qemu-iobatch-check packaging/80qemu-iobatch
           packaging/90-qemu-iobatch packaging/qemu-iobatch-apt.control
           packaging/qemu-iobatch-apt.postrm packaging/qemu-iobatch-apt.preinst packaging/maintainer scripts/apt-pkg.sh)

series() {
    check_series || die "fix $LINE_REL/patches/series"
    local files=() g
    for g in "${PATCH_GROUPS[@]}"; do
        mapfile -t -O "${#files[@]}" files < <(series_in "$g")
    done
    [ ${#files[@]} -gt 0 ] || die "$LINE_REL/patches/series lists no patch"
    local sum
    sum=$(cd "$LINE_PATCHES" && cat series "${files[@]}" | sha256sum | cut -c1-12)
    echo "qemu-iobatch, ${#files[@]} patches, $sum"
}

# rev_count: the commits that changed the line's series or its packaging
# patch.  Each commit that git lists for those paths (and the series' former
# place) counts when the series' tree (wherever it is in that commit) or the
# packaging patch differs from its parent's: a pure move is no change.
rev_count() {
    local old=${LINE_FORMER_PATCHES:-$LINE_REL/patches} pkg=${REV_PATHS[1]:-none}
    git -C "$top" rev-list HEAD -- "${REV_PATHS[@]}" ${LINE_FORMER_PATCHES:+"$LINE_FORMER_PATCHES"} |
        awk -v new="$LINE_REL/patches" -v old="$old" -v pkg="$pkg" '{
            for (r = 0; r < 2; r++) {
                c = $1 (r ? "^" : "")
                print c ":" new; print c ":" old; print c ":" pkg
            } }' |
        git -C "$top" cat-file --batch-check='%(objectname)' |
        awk '{ v[NR % 6] = ($NF == "missing") ? "-" : $1 }
             NR % 6 == 0 {
                 mine = (v[1] != "-" ? v[1] : v[2]) " " v[3]
                 parent = (v[4] != "-" ? v[4] : v[5]) " " v[0]
                 n += (mine != parent) }
             END { print n + 0 }'
}

rev() {
    if [ -n "${IOBATCH_REV:-}" ]; then
        [[ $IOBATCH_REV =~ ^[1-9][0-9]*$ ]] ||
            die "IOBATCH_REV=$IOBATCH_REV: want a positive integer"
        echo "$IOBATCH_REV"
        return
    fi
    local how="build from a full git clone of qemu-iobatch, or set IOBATCH_REV=N by hand (higher than the N of every package built before)"
    [ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" = "$top" ] ||
        die "$top is not a git clone (a tarball?): the package revision N counts the commits that changed ${REV_PATHS[*]}; $how"
    [ "$(git -C "$top" rev-parse --is-shallow-repository)" = false ] ||
        die "$top is a shallow git clone: it cannot count the commits that changed ${REV_PATHS[*]}; run 'git fetch --unshallow' first, or $how"
    [ -z "$(git -C "$top" status --porcelain -- "${REV_PATHS[@]}")" ] ||
        die "uncommitted changes in ${REV_PATHS[*]}: the package revision would not identify them; commit them first (or set IOBATCH_REV=N by hand)"
    local n
    n=$(rev_count)
    [ "$n" -gt 0 ] || die "no commit changed ${REV_PATHS[*]}; $how"
    echo "$n"
}

apt_rev() {
    if [ -n "${IOBATCH_APT_REV:-}" ]; then
        [[ $IOBATCH_APT_REV =~ ^[1-9][0-9]*$ ]] ||
            die "IOBATCH_APT_REV=$IOBATCH_APT_REV: want a positive integer"
        echo "$IOBATCH_APT_REV"
        return
    fi
    local how="build from a full git clone of qemu-iobatch, or set IOBATCH_APT_REV=M by hand (higher than the M of every qemu-iobatch-apt built before)"
    [ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" = "$top" ] ||
        die "$top is not a git clone (a tarball?): the version of qemu-iobatch-apt counts the commits that changed its files; $how"
    [ "$(git -C "$top" rev-parse --is-shallow-repository)" = false ] ||
        die "$top is a shallow git clone: it cannot count the commits that changed qemu-iobatch-apt's files; run 'git fetch --unshallow' first, or $how"
    local m
    m=$(git -C "$top" rev-list --count HEAD -- "${APT_PATHS[@]}")
    [ "$m" -gt 0 ] || die "no commit changed ${APT_PATHS[*]}; $how"
    echo "$m"
}

case ${1:-} in
    series) series ;;
    rev) line_packaged "version.sh rev"; rev ;;
    deb) line_packaged "version.sh deb"
         # shellcheck disable=SC1090  # the pin: VAR=value lines
         VERSION=$(. "$LINE_PIN"; echo "$VERSION"); r=$(rev); echo "$VERSION+iobatch$r" ;;
    apt) m=$(apt_rev); echo "1.$m" ;;
    *) echo "usage: version.sh series|rev|deb|apt" >&2; exit 2 ;;
esac
