#!/bin/sh
# Smoke checks of vblk-load against one QEMU build, a few seconds in all:
#   bench/vblk-load/check.sh build/fork/qemu-system-x86_64
set -u
QEMU=${1:?usage: check.sh PATH-TO-qemu-system-x86_64}
case $QEMU in
/*) ;;
*/*) QEMU=$PWD/$QEMU ;;
esac
cd "$(dirname "$0")"
V=./vblk-load
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

run() {  # run NAME EXPECTED-STATUS ARGS...
    name=$1 want=$2
    shift 2
    out=$(timeout 60 $V "$@" 2>&1)
    rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else bad "$name (exit $rc, want $want)"; echo "$out" | tail -5; fi
}

img=$(mktemp /dev/shm/vblk-check-XXXXXX.img)
truncate -s 16M "$img"
run "poll, EVENT_IDX"            0 --qemu "$QEMU" --duration 0.5
run "irq, EVENT_IDX"             0 --qemu "$QEMU" --duration 0.5 --mode irq
run "irq, no EVENT_IDX, 2 queues" 0 --qemu "$QEMU" --duration 0.5 --mode irq --event-idx off --queues 2 --depth 8
run "4 queues, --threads, irq"   0 --qemu "$QEMU" --duration 0.5 --mode irq --queues 4 --depth 8 --threads
run "--kick async, 4 queues, --threads" 0 --qemu "$QEMU" --duration 0.5 --mode irq --queues 4 --depth 8 --threads --kick async
run "2 queues, --threads, verify" 0 --qemu "$QEMU" --duration 0.5 --queues 2 --threads --rw randrw --verify --blockdev "driver=file,filename=$img"
run "--device-opts"              0 --qemu "$QEMU" --duration 0.2 --device-opts seg-max-adjust=off,config-wce=off
run "unknown device property"    1 --qemu "$QEMU" --duration 0.2 --device-opts x-no-such-property=1
run "no IOThread, randrw"        0 --qemu "$QEMU" --duration 0.5 --iothread off --rw randrw
run "verify on a file"           0 --qemu "$QEMU" --duration 0.5 --rw randrw --verify --blockdev "driver=file,filename=$img"
run "packed ring, poll"          0 --qemu "$QEMU" --duration 0.5 --ring packed
run "packed ring, irq, 2 queues, --threads" 0 --qemu "$QEMU" --duration 0.5 --ring packed --mode irq --queues 2 --depth 8 --threads
run "packed ring, irq, no EVENT_IDX, verify" 0 --qemu "$QEMU" --duration 0.5 --ring packed --mode irq --event-idx off --rw randrw --verify --blockdev "driver=file,filename=$img"
run "verify fails on null-co"    1 --qemu "$QEMU" --duration 0.5 --rw randrw --verify
run "json"                       0 --qemu "$QEMU" --duration 0.2 --json
# --kick eventfd: every kick written to the queue's ioeventfd, none over qtest
out=$(timeout 60 $V --qemu "$QEMU" --duration 0.5 --mode irq --queues 2 --threads --depth 4 \
      --rw randrw --verify --blockdev "driver=file,filename=$img" --kick eventfd --json 2>&1)
if echo "$out" | grep -q '"kick": "eventfd"' && echo "$out" | grep -q '"cmds": 0,' &&
   ! echo "$out" | grep -q '"kicks": 0,'; then
    ok "--kick eventfd, 2 queues, --threads, verify: kicks without qtest"
else
    bad "--kick eventfd: expected kicks and no qtest commands in the window"; echo "$out" | tail -5
fi
# QEMU's own virtqueue counters (x-query-virtio-queue-stats): absent, or
# agreeing with what the driver saw (vblk-load fails otherwise)
out=$(timeout 60 $V --qemu "$QEMU" --duration 0.5 --mode irq --queues 2 --threads --json 2>&1)
case $out in
*'"qemu_stats": null'*) ok "QEMU's virtqueue counters: not in this build" ;;
*'"check": "ok"'*) ok "QEMU's virtqueue counters agree with the driver" ;;
*) bad "QEMU's virtqueue counters"; echo "$out" | tail -8 ;;
esac
# --pin: the IOThread alone on the highest allowed CPU (vblk-load checks the
# affinity it set), or a clear refusal where there is no CPU to spare
cpus=$(nproc)
if [ "$cpus" -ge 2 ]; then
    out=$(timeout 60 $V --qemu "$QEMU" --duration 0.2 --pin --json 2>&1)
    last=$(taskset -c -p $$ | sed 's/.*[,-]//; s/.*: *//')
    case $out in
    *"\"pinned_cpus\": [$last],"*) ok "--pin: the IOThread on CPU $last" ;;
    *) bad "--pin: expected \"pinned_cpus\": [$last]"; echo "$out" | tail -5 ;;
    esac
    [ "$cpus" -gt 16 ] || run "--pin, as many IOThreads as CPUs" 2 --qemu "$QEMU" --duration 0.2 --pin \
            --iothreads "$cpus" --queues "$cpus"
fi
run "--pin without an IOThread"  2 --qemu "$QEMU" --duration 0.2 --pin --iothread off
# a hostile guest (chaos.sh runs all cases): one that breaks the device, one
# that must not, and a self-test that must fail
run "chaos: zero-length buffer"  0 --qemu "$QEMU" --chaos zero-len
run "chaos: past the disk's end" 0 --qemu "$QEMU" --chaos past-end
run "chaos: undeclared write fails" 1 --qemu "$QEMU" --chaos selftest-corrupt
run "chaos: packed ring, buffer id 65535" 0 --qemu "$QEMU" --chaos bad-head --ring packed
run "chaos: discard flags, io_uring" 0 --qemu "$QEMU" --chaos dwz-flags --aio io_uring
run "chaos: a lost write is seen"  1 --qemu "$QEMU" --chaos selftest-stale
run "bad option"                 2 --depth 0
run "bad --kick"                 2 --kick later
run "bad --ring"                 2 --ring round
run "--aio without --chaos"      2 --aio native
run "bad --device-opts"          2 --device-opts ",a=b"
run "missing QEMU"               1 --qemu /nonexistent/qemu-system-x86_64
run "QEMU fails to start"        1 --qemu "$QEMU" --blockdev driver=no-such-driver
rm -f "$img"
[ $fail -eq 0 ] && echo "all passed"
exit $fail
