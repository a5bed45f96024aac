# Rounds of the verify workload on several disks at once, while the host
# migrates the VM, runs block jobs or just watches (tests/guest/ops.py).
# DISKS: the serials of the disks (virtio-blk or scsi-hd).  Each disk has
# two regions of 2*MB MiB; round N writes the whole of region N%2 with the
# verify workload (verify_fio: fio verifies what it wrote), on all disks
# at once, with data of its own (fio randseed N*64+K+1 on the K-th disk:
# a write that is lost leaves the data of another round, or of another
# disk, which the verify sees).  Then both regions of every disk are read
# back and verified (fio --verify_only): round N's, and round N-1's in
# the other region, so that after whatever the host did during the round
# the whole of what the disks hold is checked.  Rounds go on until ROUNDS
# rounds are done or, without ROUNDS, until the control disk (serial
# iobatch-ctl, written by the host) says IOBATCH-STOP at the start of a
# round; then both regions of every disk are verified again, on whatever
# QEMU and image the disk has by then.  Markers: round-start N,
# round-io-done N, round-done N, rounds-done N.  While fio runs, @@TICK
# SERIAL=COMPLETED/INFLIGHT ... every second (requests, /sys/block/X/stat).

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

# run_all KIND ROUND...: the verify workload (KIND verify) or its
# verification (KIND verifyonly*) of each ROUND, in the region it wrote
# (ROUND%2), on every disk, all at once; print each result, fail on the
# first that failed.
run_all() {
    kind=$1; shift
    pids= names= busy=
    k=0
    for s in $DISKS; do
        eval "d=\$dev_$k"
        eng=io_uring; [ $((k % 2)) = 0 ] || eng=libaio
        for n in "$@"; do
            name=$kind-r$n-$s
            mode=verify opt=--verify_only
            [ "$kind" != verify ] || mode=write opt=''
            verify_fio "/tmp/$name.fio" "$d" "$eng" "$MB" $((n % 2 * 2 * MB)) \
                $((n * 64 + k + 1)) $mode
            ( rc=0; fio --eta=never --output-format=json --output="/tmp/$name.json" $opt \
                  "/tmp/$name.fio" || rc=$?
              echo $rc > "/tmp/$name.rc" ) &
            pids="$pids $!" names="$names $name"
        done
        busy="$busy $s=${d#/dev/}"
        k=$((k + 1))
    done
    ticker $busy &
    tick=$!
    wait $pids
    kill $tick
    wait $tick || true
    for name in $names; do
        fio_show "$name" "$(cat "/tmp/$name.rc")"
        rm -f "/tmp/$name.json" "/tmp/$name.rc" "/tmp/$name.fio"
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
    run_all verify $r
    mark "round-io-done $r"
    if [ $r -ge 2 ]; then run_all verifyonly $r $((r - 1)); else run_all verifyonly $r; fi
    mark "round-done $r"
done
[ $r -ge 1 ] || fail "no round ran"
if [ $r -ge 2 ]; then run_all verifyonly-end $r $((r - 1)); else run_all verifyonly-end $r; fi
mark "rounds-done $r"
