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
#                   (bookworm: packaging/x86only.patch, trixie:
#                   packaging/x86only-trixie.patch), empty for a line
#                   without packages
#   LINE_CHANGELOG  the fork's releases of the line, merged into Debian's
#                   debian/changelog (packaging/changelog, packaging/
#                   changelog-trixie; empty: no release yet)
#   LINE_DEB_PACKAGES  (an array) the binary packages that make deb builds
#                   with the profile pkg.qemu.x86only of LINE_PACKAGING
#   LINE_FORMER_PATCHES  where the line's series was before lines/ existed,
#                   relative to the top (bookworm: patches), or empty; the
#                   package revision (scripts/version.sh) counts its history
#                   there too
# and the functions all_lines (every line, one a line), line_packaged,
# host_release and line_on_host.
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
LINE_PACKAGING= LINE_CHANGELOG= LINE_FORMER_PATCHES= LINE_DEB_PACKAGES=()
case $LINE in
    bookworm)
        LINE_PACKAGING=$top/packaging/x86only.patch
        LINE_CHANGELOG=$top/packaging/changelog
        LINE_FORMER_PATCHES=patches
        LINE_DEB_PACKAGES=(qemu-system-x86 qemu-system-common qemu-system-gui
                           qemu-block-extra qemu-utils) ;;
    trixie)
        LINE_PACKAGING=$top/packaging/x86only-trixie.patch
        LINE_CHANGELOG=$top/packaging/changelog-trixie
        # 10.0 puts the SPICE and OpenGL display modules in packages of
        # their own; qemu-system-x86 recommends them.
        LINE_DEB_PACKAGES=(qemu-system-x86 qemu-system-common qemu-system-gui
                           qemu-system-modules-spice qemu-system-modules-opengl
                           qemu-block-extra qemu-utils) ;;
esac

# line_packaged WHAT: stop unless the line has Debian packages (make deb).
line_packaged() {
    [ -n "$LINE_PACKAGING" ] && return 0
    echo "error: $1: LINE=$LINE has no Debian packaging (scripts/line.sh: LINE_PACKAGING)" >&2
    exit 2
}

# host_release: the codename of the Debian release this host runs, or empty.
host_release() {
    (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
}

# line_on_host WHAT: stop unless this host runs the line's Debian release
# (what is built or installed on the host itself must match it).
line_on_host() {
    local host
    host=$(host_release)
    [ "$host" = "$LINE" ] && return 0
    echo "error: $1 on this host needs Debian $LINE, and this host runs ${host:-an unknown release}" >&2
    exit 2
}
