# Hot-unplug and system_reset with requests in flight (tests/guest/ops.py).
# The data must stay verifiable although the host cuts requests off, so
# every block of /dev/vda's two regions holds a pattern of its own offset
# ("IOBATCH" and the offset, repeated: fio verify_pattern %o): region A
# (A_MB MiB) in blocks of 4 KiB, region B (B_MB MiB, after A) in blocks of
# 128 KiB.  The first boot fills both and flushes; from then on the load
# only rewrites blocks with the same pattern (idempotent: a write that is
# cut off, or lost, or half done, leaves the block as it was) and reads
# them back (a read verifies the pattern).  After each unplug and each
# boot, the whole of both regions is read back and verified.
# A header sector after the regions says IOBATCH-FILLED and the boot count.
#
# MODE=unplug: CYCLES times, the load runs (@@MARK unplug-me N) until the
# host unplugs the disk, which ends it with I/O errors (its result is
# named cut-*: ENODEV or EIO are allowed there, a verify error is not);
# then the guest waits for the disk to come back and verifies it.
# MODE=storm: every boot up to RESETS+1 starts the load (@@MARK storm-io N)
# and waits for the host's system_reset; the boot after the last reset
# runs the load to its end.  Both end with a bounded load (LOAD_SECONDS)
# that must complete without an error, and a verification.
A_MB=${A_MB:-16} B_MB=${B_MB:-32}
HDR=$(((A_MB + B_MB) * 2048))
DEV=/dev/vda

# job FILE KIND [SECONDS [VERIFY]]: fill (write both regions, verify),
# check (read both, verify), load (random idempotent writes and reads in
# both regions, with a flush every 16 writes, for SECONDS, default 600;
# the reads verify unless VERIFY is 0).
job() {
    cat > "$1" <<JOB
[global]
filename=$DEV
direct=1
ioengine=${ENGINE:-io_uring}
verify=pattern
verify_pattern="IOBATCH"%o
verify_fatal=1
JOB
    case $2 in
        fill|check)
            rw=write; [ "$2" = fill ] || rw=read
            cat >> "$1" <<JOB
rw=$rw
iodepth=16
end_fsync=$([ "$2" = fill ] && echo 1 || echo 0)
[a]
bs=4k
size=${A_MB}M
[b]
bs=128k
offset=${A_MB}M
size=${B_MB}M
JOB
            ;;
        load)
            cat >> "$1" <<JOB
time_based
runtime=${3:-600}
iodepth=8
[wa]
rw=randwrite
do_verify=0
fsync=16
bs=4k
size=${A_MB}M
[ra]
rw=randread
$([ "${4:-1}" = 1 ] || echo verify=null)
bs=4k
size=${A_MB}M
[wb]
rw=randwrite
do_verify=0
fsync=16
bs=128k
offset=${A_MB}M
size=${B_MB}M
[rb]
rw=randread
$([ "${4:-1}" = 1 ] || echo verify=null)
bs=128k
offset=${A_MB}M
size=${B_MB}M
JOB
            ;;
    esac
}

# load_until_cut NAME: run the load until the host ends it (unplug or
# reset), ticking meanwhile; print its result (any exit status: the
# harness checks the errors).  Its reads do not verify: when the disk
# goes, the guest's driver sets its capacity to 0, a write then fails
# with ENOSPC but a read returns 0 bytes (EOF), and fio would verify its
# buffer as it was (the block it read before) and report EILSEQ; the whole
# disk is verified after every unplug and boot instead.
load_until_cut() {
    job /tmp/load.fio load 600 0
    ticker vda=vda &
    tick=$!
    rc=0
    fio --eta=never --output-format=json --output="/tmp/$1.json" /tmp/load.fio || rc=$?
    kill $tick
    wait $tick || true
    echo "@@FIO-BEGIN $1"
    cat "/tmp/$1.json"
    echo "@@FIO-END $1 rc=$rc"
}

wait_dev $DEV
h=$(dd if=$DEV bs=512 skip=$HDR count=1 2>/dev/null | tr -d '\000')
case $h in
    "IOBATCH-FILLED "*) boot=$((${h#IOBATCH-FILLED } + 1)) ;;
    *)
        job /tmp/fill.fio fill
        fio_json fill /tmp/fill.fio
        boot=1
        ;;
esac
printf 'IOBATCH-FILLED %s\n' $boot | dd of=$DEV bs=512 seek=$HDR conv=sync,fsync 2>/dev/null \
    || fail "header"
job /tmp/check.fio check
fio_json "verifyonly-check-boot$boot" /tmp/check.fio
mark "boot-verified $boot"

case $MODE in
    unplug)
        c=0
        while [ $c -lt "$CYCLES" ]; do
            c=$((c + 1))
            load_until_cut "cut-load-$c" &
            load=$!
            mark "unplug-me $c"
            n=0
            while [ -b $DEV ]; do n=$((n + 1)); [ $n -le 900 ] || fail "$DEV not unplugged"; usleep 100000; done
            wait $load
            mark "unplugged $c"
            wait_dev $DEV 90
            mark "replugged $c"
            fio_json "verifyonly-check-replug$c" /tmp/check.fio
        done
        ;;
    storm)
        if [ $boot -le "$RESETS" ]; then
            mark "storm-io $boot"
            load_until_cut "cut-load-$boot"
            fail "the load ended without a reset (boot $boot of $((RESETS + 1)))"
        fi
        ;;
    *) fail "MODE=$MODE" ;;
esac
job /tmp/final.fio load "${LOAD_SECONDS:-3}"
fio_json load-final /tmp/final.fio
fio_json verifyonly-check-end /tmp/check.fio
mark "inflight-done $boot"
