# Rounds of the verify workload on several disks at once, while the host
# migrates the VM, runs block jobs or just watches (tests/guest/ops.py).
# DISKS: the serials of the disks (virtio-blk or scsi-hd).  Each disk has
# two regions of 2*MB MiB; round N writes region N%2 with the verify
# workload (verify_fio: fio verifies what it wrote), on all disks at once,
# then reads it back once more (fio --verify_only).  Rounds go on until
# ROUNDS rounds are done or, without ROUNDS, until the control disk
# (serial iobatch-ctl, written by the host) says IOBATCH-STOP at the start
# of a round; then both regions of every disk are verified again: the
# whole of what the rounds wrote, on whatever QEMU and image the disk has
# by then.  Markers: round-start N, round-io-done N, round-done N,
# rounds-done N.  While fio runs, @@TICK SERIAL=COMPLETED/INFLIGHT ...
# every second (requests, /sys/block/X/stat).

# find_dev SERIAL: dev= the node of the disk with that serial (virtio-blk:
# its serial file; scsi-hd: VPD page 0x80, a 4-byte header then the serial).
find_dev() {
    dev=
    for s in /sys/block/vd*/serial; do
        if [ -r "$s" ] && [ "$(cat "$s")" = "$1" ]; then
            dev=${s%/serial}; dev=/dev/${dev#/sys/block/}; return
        fi
    done
    for s in /sys/block/sd*/device/vpd_pg80; do
        if [ -r "$s" ] && [ "$(tail -c +5 "$s" | tr -d ' \000')" = "$1" ]; then
            dev=${s%/device/vpd_pg80}; dev=/dev/${dev#/sys/block/}; return
        fi
    done
}

# wait_serial SERIAL: dev= its node, waiting up to 20 s for the disk.
wait_serial() {
    n=0
    find_dev "$1"
    while [ -z "$dev" ]; do
        n=$((n + 1)); [ $n -le 200 ] || fail "no disk with serial $1"
        usleep 100000
        find_dev "$1"
    done
    wait_dev "$dev"
}

ctl_says() {
    [ -n "$ctl" ] && dd if="$ctl" bs=512 count=1 iflag=direct 2>/dev/null | tr -d '\000' | grep -q "$1"
}

# run_all KIND ROUND REGION: the verify workload (KIND verify) or its
# verification (KIND verifyonly) on REGION of every disk, all at once;
# print each result, fail on the first that failed.
run_all() {
    pids= names= busy=
    k=0
    for s in $DISKS; do
        eval "d=\$dev_$k"
        eng=io_uring; [ $((k % 2)) = 0 ] || eng=libaio
        job=/tmp/region$3-$s.fio
        verify_fio "$job" "$d" "$eng" "$MB" $(($3 * 2 * MB))
        name=$1-r$2-$s
        opt=; [ "$1" = verify ] || opt=--verify_only
        ( rc=0; fio --eta=never --output-format=json --output="/tmp/$name.json" $opt "$job" || rc=$?
          echo $rc > "/tmp/$name.rc" ) &
        pids="$pids $!" names="$names $name" busy="$busy $s=${d#/dev/}"
        k=$((k + 1))
    done
    ticker $busy &
    tick=$!
    wait $pids
    kill $tick
    wait $tick || true
    for name in $names; do
        fio_show "$name" "$(cat "/tmp/$name.rc")"
        rm -f "/tmp/$name.json" "/tmp/$name.rc"
    done
}

ctl=
[ "${CTL:-0}" = 0 ] || { wait_serial iobatch-ctl; ctl=$dev; }
k=0
for s in $DISKS; do
    wait_serial "$s"
    echo "@@INFO disk $s is $dev"
    eval "dev_$k=$dev"
    k=$((k + 1))
done
mark io-start
r=0
while :; do
    if [ -n "${ROUNDS:-}" ]; then
        [ $r -lt "$ROUNDS" ] || break
    elif ctl_says IOBATCH-STOP; then
        break
    fi
    r=$((r + 1))
    mark "round-start $r"
    run_all verify $r $((r % 2))
    mark "round-io-done $r"
    run_all verifyonly $r $((r % 2))
    mark "round-done $r"
done
[ $r -ge 1 ] || fail "no round ran"
run_all verifyonly-end $r $((r % 2))
[ $r -lt 2 ] || run_all verifyonly-end $((r - 1)) $(((r - 1) % 2))
mark "rounds-done $r"
