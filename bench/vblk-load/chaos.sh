#!/bin/sh
# vblk-load --chaos against one QEMU build: test-image, every case with and
# without an IOThread, then the self-tests, which must fail in their own
# way (docs/vblk-load.md, "A hostile driver"):
#   bench/vblk-load/chaos.sh build/fork/qemu-system-x86_64
# One line per run, "ok NAME: what happened" or "FAIL NAME: why" (with the
# command that reproduces it); exit status 1 if any run failed.
set -u
QEMU=${1:?usage: chaos.sh PATH-TO-qemu-system-x86_64}
case $QEMU in
/*) ;;
*/*) QEMU=$PWD/$QEMU ;;
esac
cd "$(dirname "$0")"
V=./vblk-load
fail=0

# run NAME WANT ARGS...: one vblk-load --chaos run, which must exit WANT
run() {
    name=$1 want=$2
    shift 2
    out=$(timeout -k 5 60 $V --qemu "$QEMU" "$@" 2>&1)
    rc=$?
    last=$(printf '%s\n' "$out" | grep -v '^  ' | tail -1)
    case $rc in
    3) why="QEMU CRASHED" ;;
    4) why="QEMU HUNG" ;;
    124|137) why="vblk-load timed out (60s)" ;;
    *) why="exit status $rc" ;;
    esac
    if [ "$rc" -eq "$want" ]; then
        echo "ok   $name: ${last#ok   }"
    else
        fail=1
        echo "FAIL $name: $why, expected $want: $last"
        echo "    reproduce: bench/vblk-load/vblk-load --qemu $QEMU $*"
        printf '%s\n' "$out" | sed 's/^/    | /' | tail -12
    fi
}

if ./test-image >/dev/null 2>&1; then
    echo "ok   test-image: the image check catches changed bytes"
else
    fail=1
    echo "FAIL test-image: the image check is blind"; ./test-image | sed 's/^/    | /'
fi
# the device on an IOThread (the path the series changed) with the good
# queue polled, then waiting for interrupts with and without EVENT_IDX (a
# lost notification stalls it), then in the main loop
for c in $($V --chaos list | cut -d' ' -f1); do
    run "$c/iothread" 0 --chaos "$c" --iothread on
    run "$c/iothread-irq" 0 --chaos "$c" --iothread on --mode irq
    run "$c/iothread-irq-noevidx" 0 --chaos "$c" --iothread on --mode irq --event-idx off
    run "$c/main-loop" 0 --chaos "$c" --iothread off
done
while read -r c want rest; do
    run "$c" "$want" --chaos "$c" --timeout 2
done <<END
$($V --chaos selftests)
END
exit $fail
