# Helpers for workloads (sourced by /init before the workload, under sh -e).

mark() { echo "@@MARK $*"; }
fail() { echo "@@ERROR $*"; exit 1; }

# wait_dev DEV [SECONDS]: wait for a block device node to appear.
wait_dev() {
    n=0
    while [ ! -b "$1" ]; do
        n=$((n + 1)); [ $n -le $((${2:-10} * 10)) ] || fail "no device $1"
        usleep 100000
    done
}

# fio_json NAME ARGS...: run fio with JSON output, print it between markers.
fio_json() {
    name=$1; shift
    rc=0
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

# verify_fio FILE DEV ENGINE SIZE_MB [OFFSET_MB]: write the job file of the
# standard verify workload: two jobs on two halves of the 2*SIZE_MB MiB of
# DEV from OFFSET_MB (default 0) on, one at iodepth 1, one at iodepth 32;
# mixed random reads and writes, block sizes 512 B..256 KiB, an fsync
# (flush) every 16 writes, verify=crc32c, fatal.  With SPLIT_CPUS=N:
# N jobs instead, job K on its own Nth of the space and pinned to CPU K,
# iodepth 1 and 32 in turn, so that the disk's first N queues all carry
# requests (Linux submits on the queue of the submitting CPU).
verify_fio() {
    if [ "${SPLIT_CPUS:-0}" -gt 0 ]; then
        verify_fio_split "$@"
        return
    fi
    verify_fio_global "$@" > "$1"
    cat >> "$1" <<JOB
[qd1]
iodepth=1
offset=${5:-0}M
[qd32]
iodepth=32
offset=$((${5:-0} + $4))M
JOB
}

# verify_fio_global FILE DEV ENGINE SIZE_MB: the [global] section of
# verify_fio's job file, on standard output
verify_fio_global() {
    cat <<JOB
[global]
filename=$2
direct=1
ioengine=$3
rw=randrw
rwmixread=40
bsrange=512-256k
verify=crc32c
verify_fatal=1
fsync=${FSYNC:-16}
$([ "${HIPRI:-0}" = 0 ] || echo hipri=1)
size=${4}M
loops=${LOOPS:-1}
JOB
}

verify_fio_split() {
    # local: the callers' loops use names like k
    local per cpu qd
    verify_fio_global "$@" > "$1"
    per=$((2 * $4 / SPLIT_CPUS))
    cpu=0
    while [ $cpu -lt "$SPLIT_CPUS" ]; do
        qd=1; [ $((cpu % 2)) = 0 ] || qd=32
        printf '[cpu%s]\ncpus_allowed=%s\niodepth=%s\nsize=%sM\noffset=%sM\n' \
            $cpu $cpu $qd $per $((${5:-0} + cpu * per)) >> "$1"
        cpu=$((cpu + 1))
    done
}

# verify_job DEV ENGINE SIZE_MB [fio options...]: the standard verify
# workload (verify_fio) on the first 2*SIZE_MB MiB of DEV.
verify_job() {
    dev=$1 eng=$2 mb=$3; shift 3
    verify_fio /tmp/verify.fio "$dev" "$eng" "$mb"
    n=verify; case " $* " in *" --verify_only "*) n=verifyonly ;; esac
    fio_json "$n-$(basename "$dev")" "$@" /tmp/verify.fio
}

# zero_discard DEV OFFSET_MB LEN_MB: write-zeroes (BLKZEROOUT) and discard
# on a written region; the zeroed region must read back as zeroes, the
# discarded one must be readable and writable (verified) again.
zero_discard() {
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
    while :; do
        line=@@TICK
        for b in "$@"; do
            line="$line ${b%=*}=$(awk '{ print $1 + $5 + $12 + $15 "/" $9 }' "/sys/block/${b#*=}/stat" 2>/dev/null || true)"
        done
        echo "$line"
        sleep 1
    done
}
