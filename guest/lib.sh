# Helpers for workloads (sourced by /init before the workload, under sh -e).

mark() { echo "@@MARK $*"; }
fail() { echo "@@ERROR $*"; exit 1; }

# wait_dev DEV [SECONDS]: wait for a block device node to appear.
wait_dev() {
    local n=0
    while [ ! -b "$1" ]; do
        n=$((n + 1)); [ $n -le $((${2:-10} * 10)) ] || fail "no device $1"
        usleep 100000
    done
}

# fio_json NAME ARGS...: run fio with JSON output, print it between markers.
fio_json() {
    local name=$1 rc=0
    shift
    fio --eta=never --output-format=json --output="/tmp/$name.json" "$@" || rc=$?
    fio_show "$name" $rc
}

# fio_show NAME RC: print fio's JSON output /tmp/NAME.json between the
# markers the harness parses; fail if fio's exit status RC was not 0.
fio_show() {
    echo "@@FIO-BEGIN $1"
    cat "/tmp/$1.json"
    echo "@@FIO-END $1 rc=$2"
    [ "$2" -eq 0 ] || fail "fio $1 rc=$2"
}

# verify_fio FILE DEV ENGINE SIZE_MB OFFSET_MB SEED [MODE]: write the job
# file of the standard verify workload on the 2*SIZE_MB MiB of DEV from
# OFFSET_MB on.  Two writers, qd1 (iodepth 1) and qd32 (iodepth 32), each
# on its half: each writes every block of its half once, in random order,
# block sizes 512 B..256 KiB, an fsync (flush) every FSYNC (16) writes,
# then reads the whole half back and verifies it (verify=crc32c: random
# data, and a header with the block's offset, length and seed), fatal.
# Beside each, a reader (qd1r, qd32r) reads its half at random meanwhile,
# unverified (it reads blocks while they are written), so that reads and
# writes are in flight together.  MODE verify: the writers only (with
# fio --verify_only: verify what that workload wrote with that SEED).
#
# With SPLIT_CPUS=N: N writers instead (cpu0, cpu1, ...), writer K on its
# own Nth of the space, iodepth 1 and 32 in turn, pinned to CPU K with its
# reader, so that the disk's first N queues all carry requests (Linux
# submits on the queue of the submitting CPU).
#
# SEED (fio randseed) makes the data and the order of a pass unique: a
# write that is lost leaves a block of another pass, whose seed (or offset
# or length) the verify finds wrong.  Without it every pass on a region
# writes the same bytes again, and a lost write goes unseen.  The writers
# are rw=randrw with rwmixread=0 and not rw=randwrite: fio 3.33 checks
# the seed of a block only in a job that both reads and writes (a write-
# or read-only job takes the seed from the header it reads); and a mix of
# reads in the same job would leave the blocks it reads unwritten, so the
# half would not hold one pass's data as a whole.
verify_fio() {
    # local: the callers' loops use names like k
    local n per k qd
    cat > "$1" <<JOB
[global]
filename=$2
direct=1
ioengine=$3
bsrange=512-256k
randseed=$6
allow_file_create=0
$([ "${HIPRI:-0}" = 0 ] || echo hipri=1)
JOB
    if [ "${SPLIT_CPUS:-0}" -gt 0 ]; then
        n=$SPLIT_CPUS
    else
        n=2
    fi
    per=$((2 * $4 / n))
    k=0
    while [ $k -lt $n ]; do
        qd=1; [ $((k % 2)) = 0 ] || qd=32
        verify_writer "$1" $k $qd $per $(($5 + k * per))
        k=$((k + 1))
    done
    [ "${7:-write}" = verify ] && return 0
    k=0
    while [ $k -lt $n ]; do
        qd=1; [ $((k % 2)) = 0 ] || qd=16
        verify_reader "$1" $k $qd $per $(($5 + k * per))
        k=$((k + 1))
    done
}

# verify_name K: the name of verify_fio's Kth writer (its reader's with an r)
verify_name() {
    if [ "${SPLIT_CPUS:-0}" -gt 0 ]; then
        echo "cpu$1"
    elif [ "$1" = 0 ]; then
        echo qd1
    else
        echo qd32
    fi
}

# verify_pin K: pin a job of verify_fio to CPU K with SPLIT_CPUS
verify_pin() {
    [ "${SPLIT_CPUS:-0}" = 0 ] || echo "cpus_allowed=$1"
}

# verify_writer FILE K IODEPTH SIZE_MB OFFSET_MB: verify_fio's Kth writer
verify_writer() {
    cat >> "$1" <<JOB
[$(verify_name "$2")]
rw=randrw
rwmixread=0
verify=crc32c
verify_fatal=1
fsync=${FSYNC:-16}
iodepth=$3
size=${4}M
offset=${5}M
$(verify_pin "$2")
JOB
}

# verify_reader FILE K IODEPTH SIZE_MB OFFSET_MB: verify_fio's Kth reader,
# unverified, beside the Kth writer
verify_reader() {
    cat >> "$1" <<JOB
[$(verify_name "$2")r]
rw=randread
iodepth=$3
size=${4}M
io_size=$(($4 * 512))k
offset=${5}M
$(verify_pin "$2")
JOB
}

# verify_job DEV ENGINE SIZE_MB [fio options...]: the standard verify
# workload (verify_fio) on the first 2*SIZE_MB MiB of DEV, with seed
# VSEED (default 1): a second pass on the same blocks needs another
# VSEED, and a --verify_only the VSEED of the pass it verifies.
verify_job() {
    local dev eng mb n mode
    dev=$1 eng=$2 mb=$3; shift 3
    n=verify mode=write
    case " $* " in *" --verify_only "*) n=verifyonly mode=verify ;; esac
    verify_fio /tmp/verify.fio "$dev" "$eng" "$mb" 0 "${VSEED:-1}" $mode
    fio_json "$n-$(basename "$dev")" "$@" /tmp/verify.fio
}

# zero_discard DEV OFFSET_MB LEN_MB: write-zeroes (BLKZEROOUT) and discard
# on a written region; the zeroed region must read back as zeroes, the
# discarded one must be readable and writable (verified) again.
zero_discard() {
    local dev off len q wz dz got want
    dev=$1 off=$2 len=$3 q=/sys/block/$(basename "$1")/queue
    wz=$(cat $q/write_zeroes_max_bytes) dz=$(cat $q/discard_max_bytes)
    echo "@@INFO $dev write_zeroes_max_bytes=$wz discard_max_bytes=$dz"
    [ "${REQUIRE_WZ:-1}" = 0 ] || [ "$wz" -gt 0 ] || fail "$dev: no write-zeroes support"
    [ "$dz" -gt 0 ] || fail "$dev: no discard support"
    fio --eta=never --name=fill --filename="$dev" --direct=1 --rw=write --bs=64k \
        --offset=${off}M --size=$((2 * len))M --verify=crc32c --verify_fatal=1 \
        --output=/dev/null || fail "fill before zero/discard"
    /bin/blkdiscard -z -o $((off * 1048576)) -l $((len * 1048576)) "$dev" || fail "blkdiscard -z"
    got=$(dd if="$dev" bs=1M skip=$off count=$len iflag=direct 2>/dev/null | md5sum)
    want=$(dd if=/dev/zero bs=1M count=$len 2>/dev/null | md5sum)
    [ "$got" = "$want" ] || fail "$dev: write-zeroes region does not read as zeroes"
    /bin/blkdiscard -o $(((off + len) * 1048576)) -l $((len * 1048576)) "$dev" || fail "blkdiscard"
    dd if="$dev" of=/dev/null bs=1M skip=$((off + len)) count=$len iflag=direct 2>/dev/null \
        || fail "read after discard"
    fio --eta=never --name=refill --filename="$dev" --direct=1 --rw=randwrite --bs=4k \
        --offset=$((off + len))M --size=${len}M --verify=crc32c --verify_fatal=1 \
        --output=/dev/null || fail "verify after discard"
    mark "zero-discard ok $dev"
}

# irq_count PATTERN: sum of all CPUs' interrupts on /proc/interrupts lines
# matching PATTERN (e.g. virtio1-req.1).
irq_count() {
    awk -v p="$1" '$NF == p || $(NF) ~ p"$" { s = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; else break; t += s } END { print t + 0 }' /proc/interrupts
}

# ticker TAG=DEV...: every second, @@TICK and TAG=COMPLETED/INFLIGHT for
# each block device DEV (reads, writes, discards and flushes completed;
# requests in flight); TAG= alone while DEV is gone (unplugged).  Reads
# sysfs only: a serial lookup would be a request to the device.
ticker() {
    local line b
    while :; do
        line=@@TICK
        for b in "$@"; do
            line="$line ${b%=*}=$(awk '{ print $1 + $5 + $12 + $15 "/" $9 }' "/sys/block/${b#*=}/stat" 2>/dev/null || true)"
        done
        echo "$line"
        sleep 1
    done
}

# -- write passes with data of their own (guest/workloads/inflight.sh) -------
# DEV has two regions: A (A_MB MiB from 0, in blocks of 4 KiB) and B (B_MB
# MiB after A, in blocks of 128 KiB).  A write pass K writes every block
# once with data of its own: "IOBATCH-K:" (K in 6 digits) and the block's
# offset, repeated (fio verify_pattern).  A block of pass K read back is
# pass K's whole, at its own offset, or it is not: a lost write leaves the
# block of an earlier pass, a torn one a block of neither, a misplaced one
# the wrong offset.  Scratch files go to WL_TMP (default /tmp).

# gen_job FILE KIND K [N]: the fio job file of KIND on both regions of DEV
# (ENGINE, default io_uring), with pass K's data:
#   pass   write every block once, in random order (iodepth 8), an fsync
#          every 16 writes and at the end; log each write that completed
#          (its offset and length, WL_TMP/done-K_clat.N.log).  With N > 1,
#          in N chunks, one after the other (fio job groups): chunk C is
#          the Cth of N equal slices of each region, written in random
#          order and flushed; beside chunk C+1 a job writes the header
#          sector HDR: "IOBATCH-PASS K-1 BOOT C " (BOOT: $boot), so after
#          a reset the header says which chunks of the cut pass completed
#          (check_gens);
#   reads  random reads of both regions for 600 s (4 threads each, psync),
#          unverified;
#   check  read every block (iodepth 16) and verify that it holds pass K,
#          going on after a block that does not (fio names each);
#   load   LOAD_SECONDS (3) of random rewrites of pass K's data (the same
#          again: the reads can verify it while it is rewritten) and reads
#          that verify it.
gen_job() {
    # local: the callers loop over names like c and n (inflight.sh)
    local n=${4:-1} pat c sfx r
    [ "$2" = pass ] || [ "$n" = 1 ] || fail "gen_job $2 in $n chunks"
    chunks_ok "$n"
    cat > "$1" <<JOB
[global]
filename=$DEV
direct=1
ioengine=${ENGINE:-io_uring}
allow_file_create=0
verify_state_save=0
JOB
    pat="verify_pattern=\"IOBATCH-$(printf %06d "$3"):\"%o"
    case $2 in
        pass)
            c=0
            while [ $c -lt "$n" ]; do
                c=$((c + 1))
                [ "$n" = 1 ] && sfx= || sfx=-$c
                for r in a b; do
                    cat >> "$1" <<JOB
[w$r$sfx]
$([ $c = 1 ] || [ $r = b ] || echo stonewall)
rw=randwrite
iodepth=8
fsync=16
end_fsync=1
verify=pattern
$pat
do_verify=0
write_lat_log=${WL_TMP:-/tmp}/done-$3
log_offset=1
$(region $r "$c" "$n")
JOB
                done
                [ $c = 1 ] || printf '[h%s]\nioengine=psync\nrw=write\nbs=512\nsize=512\noffset=%s\nbuffer_pattern="IOBATCH-PASS %s %s %s "\nend_fsync=1\n' \
                    "$sfx" $((HDR * 512)) $(($3 - 1)) "${boot:-0}" $((c - 1)) >> "$1"
            done
            ;;
        reads)
            # psync: a read that returns 0 bytes (past the end of a disk
            # that went) fails with EIO; fio's aio engines count it as done.
            for r in a b; do
                printf '[r%s]\nrw=randread\nioengine=psync\nnumjobs=4\ntime_based\nruntime=600\n%s\n' \
                    $r "$(region $r)" >> "$1"
            done
            ;;
        check)
            for r in a b; do
                printf '[c%s]\nrw=read\niodepth=16\nverify=pattern\n%s\nverify_fatal=0\n%s\n%s\n' \
                    $r "$pat" continue_on_error=verify "$(region $r)" >> "$1"
            done
            ;;
        load)
            for r in a b; do
                cat >> "$1" <<JOB
[w$r]
rw=randwrite
time_based
runtime=${LOAD_SECONDS:-3}
iodepth=8
fsync=16
verify=pattern
$pat
do_verify=0
$(region $r)
[r$r]
rw=randread
time_based
runtime=${LOAD_SECONDS:-3}
iodepth=8
verify=pattern
$pat
verify_fatal=1
$(region $r)
JOB
            done
            ;;
        *) fail "gen_job $2" ;;
    esac
}

# region a|b [C N]: the fio options of region A or B, or of its Cth of N
# equal slices (chunk C, gen_job pass).
region() {
    set -- "$1" "${2:-1}" "${3:-1}"
    case $1 in
        a) printf 'bs=4k\noffset=%sk\nsize=%sk' $((($2 - 1) * A_MB * 1024 / $3)) \
               $((A_MB * 1024 / $3)) ;;
        b) printf 'bs=128k\noffset=%sk\nsize=%sk' $((A_MB * 1024 + ($2 - 1) * B_MB * 1024 / $3)) \
               $((B_MB * 1024 / $3)) ;;
    esac
}

# chunks_ok N: both regions split into N chunks of whole blocks, and a
# header sector HDR to say how many completed.
chunks_ok() {
    [ "$1" -ge 1 ] && [ $((A_MB * 256 % $1)) = 0 ] && [ $((B_MB * 8 % $1)) = 0 ] ||
        fail "$1 chunks do not split $A_MB MiB of 4 KiB blocks and $B_MB MiB of 128 KiB"
    [ "$1" = 1 ] || [ -n "${HDR:-}" ] || fail "chunks need HDR, the header sector"
}

# chunk_blocks C N FILE: the offsets in FILE (one a line) that are in the
# first C of N chunks (region's slices, gen_job pass).
chunk_blocks() {
    awk -v c="$1" -v n="$2" -v a=$((A_MB * 1048576)) -v b=$((B_MB * 1048576)) '
        { i = $1 < a ? int($1 / (a / n)) : int(($1 - a) / (b / n)); if (i < c) print }' "$3"
}

# both FILE1 FILE2: the first 5 lines that are in both files, on one line
# (busybox has no comm).
both() {
    awk 'NR == FNR { s[$0]; next } $0 in s { print; if (++n == 5) exit }' "$1" "$2" | tr '\n' ' '
}

# check_gens NAME K [K2 C [LOG...]]: every block of both regions holds pass
# K whole, or (with K2) pass K2 whole; every block of the first C of
# CHUNKS chunks of pass K2 (gen_job pass K2 CHUNKS: those the header said
# were complete) holds pass K2; and every block on which a write of pass
# K2 completed (LOG: pass K2's fio latency logs, gen_job pass) holds pass
# K2.  That is what a pass K2 that the host cut off (unplug, reset) after
# a complete pass K may leave.  Reads both regions once per pass
# (both at once); prints @@INFO NAME: how many blocks hold which pass;
# fails naming the blocks that hold neither, or that lost a completed
# write.
check_gens() {
    local name k1 k2 nc wt nblk cpids k r out rc got errs named n1 n2 neither done_n lost
    local chunked what
    name=$1 k1=$2 k2=${3:-} nc=${4:-0} wt=${WL_TMP:-/tmp}
    shift 2; [ $# = 0 ] || shift 2
    nblk=$((A_MB * 256 + B_MB * 8))
    # fio prints a line for each block that fails: one fio per pass and
    # region, each with an output of its own, its job a thread (the lines
    # of a job in a process of its own are buffered, and fio 3.33 loses
    # the last ones: 92 lines for 100 blocks that failed).
    cpids=
    for k in $k1 $k2; do
        gen_job "$wt/$name-$k.fio" check "$k"
        for r in a b; do
            ( rc=0; fio --eta=never --thread --output-format=json \
                  --output="$wt/$name-$k$r.out" --section=c$r "$wt/$name-$k.fio" \
                  >/dev/null 2>&1 || rc=$?
              echo $rc > "$wt/$name-$k$r.rc" ) &
            cpids="$cpids $!"
        done
    done
    wait $cpids
    for k in $k1 $k2; do
        for r in a b; do
            out=$wt/$name-$k$r.out
            # continue_on_error=verify: after a verify error (EILSEQ, 84)
            # fio goes on and exits 0; another error (a read that failed)
            # ends it.
            rc=$(cat "$wt/$name-$k$r.rc")
            if [ "$rc" != 0 ] || grep '"error" : ' "$out" | grep -qv ': \(0\|84\),'; then
                tail -n 30 "$out"
                fail "$name: reading region $r for pass $k failed (fio rc=$rc)"
            fi
        done
        # The blocks that do not hold pass k, one offset a line.
        sed -n 's/.*requested block: offset=\([0-9]*\),.*/\1/p' "$wt/$name-$k"[ab].out |
            sort -u > "$wt/$name-$k.bad"
        got=$(cat "$wt/$name-$k"[ab].out | grep -o '"io_bytes" : [0-9]*' |
              awk '{ s += $3 } END { print s + 0 }')
        [ "$got" = $(((A_MB + B_MB) * 1048576)) ] || fail "$name: read $got bytes for pass $k"
        # Every block that failed is named, once.
        errs=$(cat "$wt/$name-$k"[ab].out | grep -o '"total_err" : [0-9]*' |
               awk '{ s += $3 } END { print s + 0 }')
        named=$(awk 'END { print NR }' "$wt/$name-$k.bad")
        [ "$errs" = "$named" ] || fail "$name: fio counted $errs blocks without pass $k," \
            "and named $named"
    done
    n1=$(awk 'END { print NR }' "$wt/$name-$k1.bad")
    if [ -z "$k2" ]; then
        [ "$n1" = 0 ] || { cat "$wt/$name-$k1"[ab].out | grep -m 12 .
            fail "$name: $n1 of $nblk blocks do not hold pass $k1, e.g. offsets" \
                 "$(head -n 5 "$wt/$name-$k1.bad" | tr '\n' ' ')"; }
        echo "@@INFO $name: all $nblk blocks hold pass $k1"
        return 0
    fi
    n2=$(awk 'END { print NR }' "$wt/$name-$k2.bad")
    neither=$(both "$wt/$name-$k1.bad" "$wt/$name-$k2.bad")
    [ -z "$neither" ] || fail "$name: blocks that hold neither pass $k1 nor pass $k2" \
        "(torn, stale or garbage), e.g. offsets $neither"
    # The writes of pass k2 that completed, as the blocks they went to.
    awk -F', *' -v a=$((A_MB * 1048576)) '$3 == 1 {
        o = $5; if (o < a) o -= o % 4096; else o -= (o - a) % 131072; print o }' \
        "$@" /dev/null | sort -u > "$wt/$name.done"
    done_n=$(awk 'END { print NR }' "$wt/$name.done")
    lost=$(both "$wt/$name.done" "$wt/$name-$k2.bad")
    [ -z "$lost" ] || fail "$name: writes of pass $k2 completed but their blocks do not hold" \
        "it (lost writes), e.g. offsets $lost"
    chunked=
    if [ "$nc" != 0 ]; then
        chunks_ok "${CHUNKS:-1}"
        lost=$(chunk_blocks "$nc" "$CHUNKS" "$wt/$name-$k2.bad" | head -n 5 | tr '\n' ' ')
        [ -z "$lost" ] || fail "$name: blocks of the first $nc of $CHUNKS chunks of pass $k2," \
            "which completed, do not hold it (lost writes), e.g. offsets $lost"
        chunked=", and the first $nc of $CHUNKS chunks of it whole"
    fi
    if [ $# = 0 ]; then
        what="no log of the writes of pass $k2 that completed"
    else
        what="$done_n writes of pass $k2 completed, all there"
    fi
    echo "@@INFO $name: $((nblk - n1)) of $nblk blocks hold pass $k1, $((nblk - n2)) pass $k2; $what$chunked"
}
