# Sourced by the series scripts (after setting $top).  The patch groups, in
# the order they apply: fixes/ holds fixes to bugs of the base itself,
# iobatch/ the fork's own work.  In a tree each group ends at a branch of the
# same name.  The series is that of the line LINE (scripts/line.sh).
[ -n "${LINE_DIR:-}" ] || . "$top/scripts/line.sh"
PATCH_GROUPS=(fixes iobatch)

# series_in GROUP: the entries of the line's patches/series in GROUP, in order.
series_in() {
    sed -n "s|^\($1/[^[:space:]#]*\)[[:space:]]*\$|\1|p" "$LINE_PATCHES/series"
}

# check_series: every entry of the line's patches/series names an existing
# patch of a known group, and the groups come in order.
check_series() {
    local line all=() g
    while read -r line; do
        case $line in ''|'#'*) continue ;; esac
        [ -f "$LINE_PATCHES/$line" ] || { echo "$LINE_REL/patches/series: $line does not exist" >&2; return 1; }
        all+=("$line")
    done <"$LINE_PATCHES/series"
    local ordered=()
    for g in "${PATCH_GROUPS[@]}"; do
        mapfile -t -O "${#ordered[@]}" ordered < <(series_in "$g")
    done
    [ "${all[*]}" = "${ordered[*]}" ] ||
        { echo "$LINE_REL/patches/series: entries must be in groups ${PATCH_GROUPS[*]}, in that order" >&2; return 1; }
}
