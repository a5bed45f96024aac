#!/bin/bash
# fuzz.sh: run the virtio-blk libFuzzer targets of the fuzzing build
# (scripts/fuzz-build.sh) for FUZZ_SECONDS each, one after the other.
# Each target keeps its corpus in build/fuzz/corpus/TARGET (a later run
# starts from it, and from the valid requests of tests/fuzz/seeds.py) and
# writes what it finds (crash-*, timeout-*, leak-*,
# oom-*) to build/fuzz/artifacts/TARGET/; its output goes to
# build/fuzz/logs/TARGET.log.  Prints one line per target and exits 1 if
# any target found something or did not run.  A target found something
# when its run failed, or left a new crash-*, leak-*, timeout-* or oom-*
# file, or its log has a sanitizer or libFuzzer error report (a forked
# child's crash shows only there if the parent does not report it).
#
#   FUZZ_SECONDS   time per target (default 60)
#   FUZZ_TARGETS   targets to run (default: the virtio-blk ones below)
#   FUZZ_DIR       instead of build/fuzz for corpus/, artifacts/, logs/
#   FUZZ_TIMEOUT   seconds after which one input counts as a hang (default 30)
#                  where libFuzzer's alarm works; a run that is not over
#                  FUZZ_SECONDS + FUZZ_TIMEOUT + 60 s after it started is
#                  sent SIGSEGV (so that libFuzzer saves the input it is
#                  on and ASan prints where each process was), then killed
#   FUZZ_CPU_SECONDS  for a campaign on a shared machine: run each target
#                  again, FUZZ_SECONDS at a time, until it used this much
#                  CPU time (user + system, forked children included)
#   FUZZ_BIN       the fuzzer (default build/fuzz/qemu/qemu-fuzz-i386)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath -m "${FUZZ_BIN:-$top/build/fuzz/qemu/qemu-fuzz-i386}")
dir=${FUZZ_DIR:-$top/build/fuzz}
seconds=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-30}
cpu_want=${FUZZ_CPU_SECONDS:-0}
# shellcheck disable=SC2206
targets=(${FUZZ_TARGETS:-virtio-blk-fuzz virtio-blk-flags-fuzz
         generic-fuzz-virtio-blk virtio-blk-iothread-fuzz
         virtio-blk-iothread-native-fuzz virtio-blk-iothread-io_uring-fuzz})

for v in FUZZ_SECONDS:$seconds FUZZ_TIMEOUT:$timeout FUZZ_CPU_SECONDS:$cpu_want; do
    case ${v#*:} in
        ''|*[!0-9]*) echo "fuzz: error: ${v%%:*} must be a whole number of seconds, not '${v#*:}'" >&2
                     exit 2 ;;
    esac
done
[ "$seconds" -gt 0 ] || { echo "fuzz: error: FUZZ_SECONDS must be at least 1" >&2; exit 2; }
[ -x "$bin" ] ||
    { echo "fuzz: error: $bin is missing; run 'make fuzz' (or scripts/fuzz-build.sh)" >&2; exit 2; }
known=$("$bin" 2>&1 | sed -n 's/^ *\* \([^ ]*\) *: .*/\1/p')
for t in "${targets[@]}"; do
    grep -qx -- "$t" <<<"$known" ||
        { echo "fuzz: error: no fuzz target '$t' in $bin; it has: $(echo $known)" >&2; exit 2; }
done

# Undefined behaviour is a finding too: stop at the first report, so that
# libFuzzer saves the input (QEMU's --enable-sanitizers lets UBSan go on).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}

# This run's own copy, so that runs of other targets can go on beside it
seeddir=$dir/seeds.$$
trap 'rm -rf "$seeddir"' EXIT
python3 "$top/tests/fuzz/seeds.py" "$seeddir"

# What libFuzzer writes for an input that crashed, leaked, hung or ran out
# of memory, and the first line of a report of a sanitizer or of libFuzzer
artifacts() {
    find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
        -o -name 'timeout-*' -o -name 'oom-*' \) -printf '%f\n' | sort
}
reports='ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|MemorySanitizer|ThreadSanitizer)|runtime error:|SUMMARY: [A-Za-z]*Sanitizer|ALARM'

limit=$((seconds + timeout + 60))
failed=0
for t in "${targets[@]}"; do
    mkdir -p "$dir/corpus/$t" "$dir/artifacts/$t" "$dir/logs"
    log=$dir/logs/$t.log
    : >"$log"
    before=$(artifacts "$dir/artifacts/$t")
    seeds=()
    [ ! -d "$seeddir/$t" ] || seeds=("$seeddir/$t")
    rc=0 runs=0 cpu=0 start=$SECONDS
    while :; do
        # bash's time keyword: CPU time of the run and of its children
        TIMEFORMAT='%3U %3S'
        run_start=$SECONDS
        # libFuzzer's -timeout is a SIGALRM, which QEMU's main loop blocks
        # (docs/fuzzing.md): bound the whole run from outside as well.
        # timeout(1) signals its process group, forked children included.
        { time (cd "$dir/artifacts/$t" &&
                timeout --signal=SEGV --kill-after=20 "$limit" \
                "$bin" --fuzz-target="$t" -max_total_time="$seconds" \
                    -timeout="$timeout" -rss_limit_mb=4096 \
                    -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t/" \
                    "$dir/corpus/$t" "${seeds[@]}" >>"$log" 2>&1); } \
            2>"$dir/logs/$t.time" || rc=$?
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        runs=$((runs + ${n:-0}))
        cpu=$(awk -v c="$cpu" 'END { printf "%d", c + $1 + $2 }' "$dir/logs/$t.time")
        [ "$rc" -eq 0 ] && [ -n "$n" ] && [ "$cpu" -lt "$cpu_want" ] &&
            [ "$(artifacts "$dir/artifacts/$t")" = "$before" ] || break
    done
    wall=$((SECONDS - start))
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$log" | tail -n 1 || true)
    new=$(comm -13 <(echo "$before") <(artifacts "$dir/artifacts/$t") | sed '/^$/d')
    report=$(grep -m 1 -E "$reports" "$log" || true)
    if [ "$rc" -eq 0 ] && [ "$runs" -gt 0 ] && [ -z "$new" ] && [ -z "$report" ]; then
        echo "fuzz: ok $t: $runs runs in ${wall}s, ${cpu}s CPU, $cov"
    else
        failed=1
        # The last run is the one that failed.  Its length, not its exit
        # status, tells the bound's signals from others: 137 is also what
        # any SIGKILL gives (the kernel's OOM killer, say).
        if [ "$rc" -ne 0 ] && [ $((SECONDS - run_start)) -ge "$limit" ]; then
            found="hung: a run was not over after ${limit}s and was sent SIGSEGV; the input it was on is the newest crash-* in $dir/artifacts/$t (a hang, not a crash)"
        else
            found=$report
        fi
        if [ -n "$new" ]; then
            n_new=$(wc -l <<<"$new")
            found="${found:+$found; }$n_new new in $dir/artifacts/$t: $(head -n 3 <<<"$new" | xargs)$([ "$n_new" -le 3 ] || echo ' ...')"
        fi
        if [ "$rc" -eq 0 ] && [ "$runs" -gt 0 ]; then
            found="$found (the run itself ended well: a crash its process did not report, e.g. of a forked child)"
        fi
        echo "fuzz: FAIL $t: exit status $rc${found:+: $found}; log $log"
        tail -n 40 "$log" | sed 's/^/    | /'
    fi
done
exit "$failed"
