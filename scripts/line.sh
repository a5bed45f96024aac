# Sourced by the scripts that work on one line of the fork (after setting
# $top).  A line is our series on one Debian release's qemu source package:
# lines/LINE/ holds its pin (base.pin) and its series (patches/series,
# patches/GROUP/*.patch), LINE being the Debian release's codename.
# Everything else (scripts/, tests/, guest/, bench/, packaging/) is shared.
#
# LINE (environment; make passes its variable LINE, default bookworm)
# selects the line.  Sets:
#   LINE_DIR        lines/LINE (LINE_REL: the same, relative, for messages)
#   LINE_PIN        lines/LINE/base.pin
#   LINE_PATCHES    lines/LINE/patches
#   LINE_SUITES     the suites of deb.debian.org/debian its qemu comes
#                   from (LINE, LINE-updates); LINE_SECURITY_SUITE, that of
#                   deb.debian.org/debian-security (LINE-security)
#   LINE_BUILD      where its generated trees go: build/ for bookworm,
#                   which keeps the paths it had before there were two lines
#                   (build/src/base, build/check-update, ...), build/LINE/
#                   for every other line
#   LINE_TREE       the tree of 'make tree': tree/ for bookworm, tree-LINE/
#   LINE_MAKE       what a message adds to a make command to name the line:
#                   nothing for bookworm, " LINE=trixie" for trixie
#   LINE_PACKAGING  the patch to Debian's debian/ that 'make deb' applies
#                   (packaging/x86only.patch), empty while the line has no
#                   packages (trixie: issue 33, item 5)
#   LINE_FORMER_PATCHES  where the line's series was before lines/ existed,
#                   relative to the top (bookworm: patches), or empty; the
#                   package revision (scripts/version.sh) counts its history
#                   there too
# and the functions all_lines (every line, one a line) and line_only.
DEFAULT_LINE=bookworm
LINE=${LINE:-$DEFAULT_LINE}

# all_lines: the name of every line (a directory of lines/ with a base.pin).
all_lines() {
    local p
    for p in "$top"/lines/*/base.pin; do
        [ -f "$p" ] && basename "$(dirname "$p")"
    done
}

if ! [[ $LINE =~ ^[a-z][a-z0-9-]*$ ]] || [ ! -f "$top/lines/$LINE/base.pin" ]; then
    echo "error: LINE=$LINE: no lines/$LINE/base.pin; the lines are: $(all_lines | tr '\n' ' ')" >&2
    exit 2
fi
LINE_DIR=$top/lines/$LINE
LINE_REL=lines/$LINE             # for messages
LINE_PIN=$LINE_DIR/base.pin
LINE_PATCHES=$LINE_DIR/patches
LINE_SUITES=("$LINE" "$LINE-updates")
LINE_SECURITY_SUITE=$LINE-security
if [ "$LINE" = "$DEFAULT_LINE" ]; then
    LINE_BUILD=$top/build
    LINE_TREE=$top/tree
    LINE_MAKE=
else
    LINE_BUILD=$top/build/$LINE
    LINE_TREE=$top/tree-$LINE
    LINE_MAKE=" LINE=$LINE"
fi
case $LINE in
    bookworm) LINE_PACKAGING=$top/packaging/x86only.patch LINE_FORMER_PATCHES=patches ;;
    *) LINE_PACKAGING= LINE_FORMER_PATCHES= ;;
esac

# line_only NAME WHAT: stop unless the line is NAME; WHAT says what exists
# for that line only so far.
line_only() {
    [ "$LINE" = "$1" ] && return 0
    echo "error: $2 exists for the $1 line only so far, not for LINE=$LINE (issue 33)" >&2
    exit 2
}
