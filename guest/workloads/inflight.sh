# Hot-unplug and system_reset with requests in flight (tests/guest/ops.py).
# /dev/vda has two regions, A (A_MB MiB in blocks of 4 KiB) and B (B_MB
# MiB after A, in blocks of 128 KiB), and a header sector past them.  The
# guest writes them in passes: pass K writes every block once, in random
# order, with data of its own (lib.sh gen_job: "IOBATCH-K:" and the
# block's offset, repeated), and logs each write that completed; once it
# is complete (and flushed), the header names it: IOBATCH-PASS K BOOT 0.
# A pass that a reset may cut (MODE=storm) goes in CHUNKS chunks, and the
# header says how many of them completed: IOBATCH-PASS K-1 BOOT C.
#
# The load: the passes one after the other and, beside them, random reads
# (unverified: when a disk goes, the guest's driver sets its capacity to
# 0, a read then returns 0 bytes and fio would compare its stale buffer),
# until the host cuts them off.  What a cut may leave, check_gens checks
# (lib.sh): every block holds the last complete pass K or the cut pass K+1,
# whole and at its own offset; and a block that a write of pass K+1
# completed on holds K+1.  A write that was lost leaves pass K (or an
# older pass) where the guest saw K+1 complete; a torn or misplaced one,
# a block of neither.  After an unplug the guest still has the log of the
# cut pass; after a reset it does not (the log was in its memory), and
# the check is of the header's pass and the next, whose first C chunks
# must hold it whole (a write lost in chunk C+1, the one the reset cut,
# stays unseen: 1/CHUNKS of a pass).  After each check a
# pass runs to its end, so the next cut again meets one complete pass.
#
# MODE=unplug: CYCLES times, the load runs (@@MARK unplug-me N) until the
# host unplugs the disk, which ends it with I/O errors (its results are
# named cut-*: EIO, ENXIO, ENODEV or ENOSPC are allowed there, and the
# harness wants at least one per cycle: the guest saw the cut); once the
# disk is back (@@MARK replugged N), check_gens.
# MODE=storm: every boot checks what the boot before left (check_gens of
# the header's pass and the next), runs a pass to its end and, up to
# RESETS+1 boots, starts the load (@@MARK storm-io N) and waits for the
# host's system_reset.
# Both end with a bounded load (LOAD_SECONDS) that rewrites the last pass's
# data as it is (so that its reads can verify it) and must complete without
# an error, and a check that every block holds that pass.
A_MB=${A_MB:-16} B_MB=${B_MB:-32} CHUNKS=${CHUNKS:-1}
HDR=$(((A_MB + B_MB) * 2048))
DEV=/dev/vda

# header K: the header names pass K (complete and flushed), this boot and
# no chunk of the next ("IOBATCH-PASS K BOOT 0 ", repeated over the
# sector; gen_job pass writes the chunks' headers).  Written by fio with
# allow_file_create=0: dd would make a file of the name of a disk that
# went, and the disk's node could not come back.
header() {
    fio --eta=never --output=/dev/null --name=header --filename=$DEV --allow_file_create=0 \
        --ioengine=psync --direct=1 --rw=write --bs=512 --size=512 --offset=$((HDR * 512)) \
        --buffer_pattern="\"IOBATCH-PASS $1 $boot 0 \"" --end_fsync=1 --verify_state_save=0
}

# run_pass K: pass K to its end (in one chunk: no reset cuts it), then
# the header.
run_pass() {
    gen_job "/tmp/pass-$1.fio" pass "$1"
    fio_json "pass-$1" "/tmp/pass-$1.fio"
    header "$1" || fail "header of pass $1"
    rm -f /tmp/done-"$1"_*.log
}

# cut_load NAME: the load, from pass $pass+1 on, until the host cuts it
# off (the disk goes, or a reset).  When it ends (the disk went, or the
# reads ended: 600 s) it prints the result of the reads (NAME-reads) and
# of the pass that the cut ended (NAME-pass), and leaves in /tmp/passes
# the last complete pass and the one that was cut.
cut_load() {
    local reads tick k last rc n rrc
    gen_job /tmp/reads.fio reads 0
    fio --eta=never --output-format=json --output="/tmp/$1-reads.json" /tmp/reads.fio &
    reads=$!
    ticker vda=vda &
    tick=$!
    k=$pass last=$pass
    while [ -b $DEV ] && kill -0 $reads 2>/dev/null; do
        k=$((k + 1))
        gen_job /tmp/cut-pass.fio pass $k "$CHUNKS"
        # allow_file_create=0: should the disk go before fio opens it,
        # fio fails rather than make a file of that name.
        rc=0
        fio --eta=never --output-format=json --output="/tmp/$1-pass.json" /tmp/cut-pass.fio \
            || rc=$?
        [ $rc = 0 ] && header $k || break
        last=$k
        rm -f /tmp/done-"$k"_*.log "/tmp/$1-pass.json"
    done
    # The reads end by themselves when the disk goes (EIO, lib.sh gen_job);
    # not if a pass failed otherwise.
    n=0
    while kill -0 $reads 2>/dev/null && [ $n -lt 200 ]; do n=$((n + 1)); usleep 100000; done
    kill $reads 2>/dev/null || true
    rrc=0
    wait $reads || rrc=$?
    kill $tick
    wait $tick || true
    # The disk may have gone between two passes: then the cut one is the
    # next, which wrote nothing.
    [ $k != $last ] || k=$((last + 1))
    echo "$last $k" > /tmp/passes
    echo "@@FIO-BEGIN $1-reads"
    cat "/tmp/$1-reads.json"
    echo "@@FIO-END $1-reads rc=$rrc"
    # A pass that fio started as the disk went (its size 0) may fail
    # before any I/O, with errors of its own: not a result of the cut.
    if grep -q '"io_bytes" : [1-9]' "/tmp/$1-pass.json" 2>/dev/null; then
        echo "@@FIO-BEGIN $1-pass"
        cat "/tmp/$1-pass.json"
        echo "@@FIO-END $1-pass rc=$rc"
    else
        echo "@@INFO $1: the disk went before pass $k wrote (fio rc=$rc)"
    fi
    rm -f "/tmp/$1-pass.json"
}

wait_dev $DEV
h=$(dd if=$DEV bs=512 skip=$HDR count=1 2>/dev/null | tr -d '\000')
case $h in
    "IOBATCH-PASS "*)
        # shellcheck disable=SC2086  # the header's words
        set -- ${h#IOBATCH-PASS }
        pass=$1 boot=$(($2 + 1)) done=$3
        # The boot before was cut off by a reset during pass $pass+1 (or
        # between two passes), after its first $done chunks; its log of
        # completed writes is gone.
        check_gens "check-boot$boot" "$pass" $((pass + 1)) "$done"
        pass=$((pass + 2))
        ;;
    "")
        boot=1 pass=1
        ;;
    *) fail "header: $h" ;;
esac
run_pass $pass
[ $boot != 1 ] || check_gens check-boot1 $pass
mark "boot-verified $boot"

case $MODE in
    unplug)
        c=0
        while [ $c -lt "$CYCLES" ]; do
            c=$((c + 1))
            cut_load "cut-$c" &
            load=$!
            mark "unplug-me $c"
            n=0
            while [ -b $DEV ]; do n=$((n + 1)); [ $n -le 900 ] || fail "$DEV not unplugged"; usleep 100000; done
            wait $load
            mark "unplugged $c"
            wait_dev $DEV 90
            mark "replugged $c"
            read -r last cut < /tmp/passes
            logs=$(ls /tmp/done-"$cut"_clat.*.log 2>/dev/null || true)
            # shellcheck disable=SC2086  # one word a log
            check_gens "check-replug$c" "$last" "$cut" 0 $logs
            rm -f /tmp/done-*.log
            pass=$((cut + 1))
            run_pass $pass
        done
        ;;
    storm)
        if [ $boot -le "$RESETS" ]; then
            mark "storm-io $boot"
            cut_load "cut-$boot"
            fail "the load ended without a reset (boot $boot of $((RESETS + 1)))"
        fi
        ;;
    *) fail "MODE=$MODE" ;;
esac
gen_job /tmp/final.fio load $pass
fio_json load-final /tmp/final.fio
check_gens check-end $pass
mark "inflight-done $boot"
