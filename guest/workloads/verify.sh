# The standard verify workload on $DEV (see verify_job), then write-zeroes
# and discard beyond the verified area if ZERO=1.
mark io-start
verify_job "$DEV" "$ENGINE" "${MB:-16}"
[ "${ZERO:-0}" = 0 ] || zero_discard "$DEV" $((2 * ${MB:-16} + 8)) 4
mark io-done
