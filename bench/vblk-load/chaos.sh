#!/bin/bash
# vblk-load --chaos against one QEMU build: test-image, every case in each
# configuration below that its ring layout allows, then the self-tests,
# which must fail in their own way (docs/vblk-load.md, "A hostile driver"):
#   bench/vblk-load/chaos.sh build/fork/qemu-system-x86_64
#   bench/vblk-load/chaos.sh --list [QEMU]  # the names of the runs, one a line
#   bench/vblk-load/chaos.sh --configs iothread,packed-irq build/base/qemu-system-x86_64
# One line per run, "ok NAME: what happened" or "FAIL NAME: why" (with the
# command that reproduces it); exit status 1 if any run failed.
set -uo pipefail
cd "$(dirname "$0")"
V=./vblk-load

# NAME RING ARGS: the device on an IOThread (the path the series changed)
# with the good queue polled, then waiting for interrupts with and without
# EVENT_IDX (a lost notification stalls it), then in the main loop; the
# disk with aio=native and io_uring; the same on a packed ring
CONFIGS='iothread             split  --iothread on
iothread-irq         split  --iothread on --mode irq
iothread-irq-noevidx split  --iothread on --mode irq --event-idx off
main-loop            split  --iothread off
native-irq           split  --iothread on --mode irq --aio native
io_uring-irq         split  --iothread on --mode irq --aio io_uring
packed-irq           packed --iothread on --mode irq --ring packed
packed-irq-noevidx   packed --iothread on --mode irq --event-idx off --ring packed
packed-io_uring      packed --iothread on --aio io_uring --ring packed
packed-main-loop     packed --iothread off --mode irq --ring packed'
# With a QEMU that has iothread-vq-mapping (9.0 and later): the good queue
# and the hostile one on two IOThreads, so that one thread breaks the
# device while the other completes
MAPPING_CONFIGS='iothreads2-irq       split  --iothreads 2 --mode irq
iothreads2-packed    packed --iothreads 2 --mode irq --ring packed --aio io_uring'

# add_mapping QEMU: the mapping configurations too, if QEMU has them
add_mapping() {
    if "$1" -device virtio-blk-pci,help 2>/dev/null | grep -q iothread-vq-mapping; then
        CONFIGS+=$'\n'$MAPPING_CONFIGS
    fi
}

# --configs NAME,...: only these configurations
only=
if [ "${1:-}" = --configs ]; then
    only=${2:?usage: chaos.sh --configs NAME,... [--list [QEMU] | QEMU]}
    shift 2
    for c in ${only//,/ }; do
        grep -q "^$c " <<<"$CONFIGS"$'\n'"$MAPPING_CONFIGS" ||
            { echo "chaos.sh: no configuration '$c'; there are: $(cut -d' ' -f1 <<<"$CONFIGS" | xargs)" >&2
              exit 2; }
    done
fi

# NAME CASE ARGS... for every case and configuration that applies to it
runs() {
    $V --chaos list | while read -r c rings _; do
        while read -r name ring args; do
            case ",$rings," in
            *",$ring,"*) ;;
            *) continue ;;
            esac
            case ",${only:-$name}," in
            *",$name,"*) echo "$c/$name $c $args" ;;
            esac
        done <<<"$CONFIGS"
    done
}

if [ "${1:-}" = --list ]; then
    # --list QEMU: the runs on that QEMU (the mapping ones if it has them)
    case ${2:-} in
    "") ;;
    /*) add_mapping "$2" ;;
    *) add_mapping "$OLDPWD/$2" ;;
    esac
    echo test-image
    runs | cut -d' ' -f1
    $V --chaos selftests | cut -f1
    exit 0
fi
QEMU=${1:?usage: chaos.sh [--configs NAME,...] PATH-TO-qemu-system-x86_64 | --list [QEMU]}
case $QEMU in
/*) ;;
*/*) QEMU=$OLDPWD/$QEMU ;;
esac
add_mapping "$QEMU"
for c in ${only//,/ }; do
    grep -q "^$c " <<<"$CONFIGS" ||
        { echo "chaos.sh: configuration '$c' needs iothread-vq-mapping, which $QEMU lacks" >&2
          exit 2; }
done
fail=0

# run NAME WANT EXPECT ARGS...: one vblk-load --chaos run, which must exit
# WANT and, if EXPECT is not empty, print it
run() {
    name=$1 want=$2 expect=$3
    shift 3
    out=$(timeout -k 5 60 $V --qemu "$QEMU" "$@" 2>&1)
    rc=$?
    last=$(printf '%s\n' "$out" | grep -v '^  ' | tail -1)
    case $rc in
    3) why="QEMU CRASHED" ;;
    4) why="QEMU HUNG" ;;
    124|137) why="vblk-load timed out (60s)" ;;
    *) why="exit status $rc" ;;
    esac
    if [ "$rc" -eq "$want" ] && { [ -z "$expect" ] || grep -qF -- "$expect" <<<"$out"; }; then
        echo "ok   $name: ${last#ok   }"
    else
        fail=1
        [ "$rc" -ne "$want" ] || why="its message lacks '$expect'"
        echo "FAIL $name: $why, expected $want: $last"
        echo "    reproduce: bench/vblk-load/vblk-load --qemu $QEMU $*"
        printf '%s\n' "$out" | sed 's/^/    | /' | tail -12
    fi
}

if ./test-image >/dev/null 2>&1; then
    echo "ok   test-image: the image check catches changed bytes and stale generations"
else
    fail=1
    echo "FAIL test-image: the image check is blind"; ./test-image | sed 's/^/    | /'
fi
while read -r name c args; do
    # shellcheck disable=SC2086
    run "$name" 0 "" --chaos "$c" $args
done < <(runs)
while IFS=$'\t' read -r c want expect _; do
    [ "$expect" != - ] || expect=
    run "$c" "$want" "$expect" --chaos "$c" --timeout 2
done < <($V --chaos selftests)
exit $fail
