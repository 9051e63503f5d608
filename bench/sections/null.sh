#!/usr/bin/env bash
# bench/sections/null.sh — bench/run null:
#   engine cost on one core, null backend, vs dpdk-testpmd txonly
#
# bench/run null runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

# Runners: each appends one JSON line to $RAW.

# run_strobe CASE ROUND SECONDS [gen options...]
run_strobe() {
    local case="$1" round="$2" secs="$3"
    shift 3
    local report="$RUN_DIR/strobe-$case-r$round.json"
    local text="$RUN_DIR/strobe-$case-r$round.txt"
    if ! in_background taskset -c "$STROBE_CPU" "$STROBE" gen --port null \
        --udp 198.18.0.1:1000-198.18.1.1:2000 --size 64 --rate max \
        --duration "${secs}s" --json "$report" "$@" >"$text" 2>&1; then
        cat "$text" >&2
        die "strobe run '$case' (round $round) failed; output above, args: $*"
    fi
    python3 "$LIB" strobe "$report" --case "$case" --round "$round" >>"$RAW"
    log "$(printf '%-12s r%d  %s' "$case" "$round" "$(grep -o '[0-9.]* Mpps, [0-9.]* ns/frame' "$text" || echo '?')")"
}

# run_testpmd ROUND SECONDS — txonly on the null vdev until SIGINT to its PID.
run_testpmd() {
    local round="$1" secs="$2"
    local out="$RUN_DIR/testpmd-r$round.log"
    # No hugepages and no NIC: --no-huge with a heap small enough for -m 512, hence the
    # smaller mbuf pool (the default pool does not fit). stdin is /dev/null so testpmd
    # starts forwarding on its own and prints stats every period until signalled; stdbuf
    # makes those lines reach the log as they are printed, so the start can be seen.
    stdbuf -oL dpdk-testpmd --no-huge --no-pci -m 512 -l "$PEER_CPUS" --file-prefix strobe-bench \
        --vdev=net_null0 -- --forward-mode=txonly --stats-period 1 \
        --total-num-mbufs=16384 </dev/null >"$out" 2>&1 &
    local pid=$!
    track "$pid"
    # Time the run from the first stats block, i.e. once forwarding has started.
    local waited=0
    until grep -q 'Port statistics' "$out" 2>/dev/null; do
        if ! alive "$pid"; then
            tail -n 20 "$out" >&2
            die "dpdk-testpmd exited before forwarding (log: $out)"
        fi
        ((waited += 1))
        ((waited < 300)) || die "dpdk-testpmd did not start forwarding within 30 s (log: $out)"
        sleep 0.1
    done
    # A little past the run time, so the stats block due at its end is printed.
    sleep "$secs.3"
    local rc=0
    finish "$pid" || rc=$?
    ((rc == 0)) || {
        tail -n 20 "$out" >&2
        die "dpdk-testpmd exited with status $rc (log: $out)"
    }
    python3 "$LIB" testpmd "$out" --case testpmd --round "$round" >>"$RAW"
    log "$(printf '%-12s r%d  %s Mpps (after the first second)' testpmd "$round" \
        "$(tail -n 1 "$RAW" | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["mpps"])')")"
}

# Eight fields that take both a counter and a random range, in the order they are added
# (MAC addresses take counters but not random ranges, so they are left out).
COUNTER_FIELDS=(
    udp.src_port=inc:1000/1/1000
    udp.dst_port=inc:2000/1/1000
    ip.src=inc:198.18.0.1/0.0.0.1/256
    ip.dst=inc:198.18.1.1/0.0.0.1/256
    ip.identification=inc:0/1/65536
    ip.time_to_live=inc:1/1/255
    ip.priority=inc:0/4/64
    ip.dont_fragment=inc:0/1/2
)
RANDOM_FIELDS=(
    udp.src_port=rand:1024-65535
    udp.dst_port=rand:1024-65535
    ip.src=rand:198.18.0.0-198.19.255.255
    ip.dst=rand:198.18.0.0-198.19.255.255
    ip.identification=rand:0-65535
    ip.time_to_live=rand:1-255
    ip.priority=rand:0-255
    ip.dont_fragment=rand:0-1
)
FIELD_COUNTS=(1 2 4 8)
BATCHES=(8 32 64 256) # 32 is the unpaced default

# vary_args KIND N — the first N fields of KIND as --vary options.
vary_args() {
    local -n fields="$1"
    local i
    for ((i = 0; i < $2; i++)); do
        printf -- '--vary\n%s\n' "${fields[i]}"
    done
}

section_null() {
    ensure_testpmd
    need_tool taskset
    need_tool stdbuf
    build_strobe
    RUN_DIR="$OUT_ROOT/null-$(date -u +%Y%m%dT%H%M%SZ)"
    RAW="$RUN_DIR/raw.jsonl"
    mkdir -p "$RUN_DIR"
    : >"$RAW"
    log "section null: results in $RUN_DIR"

    # 1. Side by side, alternating: strobe (one incrementing field, trailer on), testpmd.
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        run_strobe strobe "$r" "$DURATION" --vary ip.src=inc:198.18.0.1/0.0.0.1/256
        run_testpmd "$r" "$DURATION"
    done

    # 2. Batch sizes for the same command, the default among them so it is compared
    # under the same conditions.
    local b
    for ((r = 1; r <= FIELD_ROUNDS; r++)); do
        for b in "${BATCHES[@]}"; do
            run_strobe "batch-$b" "$r" "$BATCH_DURATION" \
                --vary ip.src=inc:198.18.0.1/0.0.0.1/256 --batch "$b"
        done
    done

    # 3. Marginal cost per field. Rounds sweep every configuration once, so slow
    # stretches of the host spread over all of them instead of hitting one.
    local n args
    for ((r = 1; r <= FIELD_ROUNDS; r++)); do
        run_strobe fields-0 "$r" "$FIELD_DURATION"
        for n in "${FIELD_COUNTS[@]}"; do
            mapfile -t args < <(vary_args COUNTER_FIELDS "$n")
            run_strobe "counter-$n" "$r" "$FIELD_DURATION" "${args[@]}"
            mapfile -t args < <(vary_args RANDOM_FIELDS "$n")
            run_strobe "random-$n" "$r" "$FIELD_DURATION" "${args[@]}"
        done
        run_strobe no-trailer "$r" "$FIELD_DURATION" --no-trailer
    done

    python3 "$LIB" summarize-null "$RAW" "$RUN_DIR/summary.json" --meta "$(machine_meta "$ROOT" \
        rounds "$ROUNDS" duration_s "$DURATION" field_duration_s "$FIELD_DURATION" \
        field_rounds "$FIELD_ROUNDS" batch_duration_s "$BATCH_DURATION" strobe_cpu "$STROBE_CPU" peer_cpus "$PEER_CPUS")"
    python3 "$LIB" markdown-null "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct null "$@"
