#!/usr/bin/env bash
# bench/sections/rxcount.sh — bench/run rxcount:
#   receivers counting xdp-live's top rate: the same unpaced 64-byte
#   flow, generated in the kernel on tx0, counted at rx0 in turn by
#   xdp-count (in the kernel), AF_XDP on every queue and AF_PACKET;
#   and the counting program's cost per frame beside a bare XDP drop
#
# bench/run rxcount runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

section_rxcount() {
    require_root rxcount
    need_tool taskset
    build_strobe
    (cd "$ROOT" && cargo build --release -p strobe-io --example xdp_count_cost >&2) ||
        die "cargo build --release -p strobe-io --example xdp_count_cost failed"
    local cost_bin="$ROOT/target/release/examples/xdp_count_cost"
    new_run_dir rxcount
    lab_up
    # Receive work where the frames arrive: no steering to the other core.
    rx_steering off
    local r rx report
    for ((r = 1; r <= RXCOUNT_ROUNDS; r++)); do
        for rx in xdp-count afxdp-all afpacket; do
            report="$RUN_DIR/$rx-r$r.json"
            local port="lab:rx@$rx"
            [[ "$rx" == afpacket ]] && port=lab:rx
            "$STROBE" gen -q --lab "$LAB_PREFIX" --port lab:tx@xdp-live --rx "$port" \
                --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --unpaced \
                --count "$RXCOUNT_FRAMES" --json "$report" >"$RUN_DIR/$rx-r$r.log" 2>&1 ||
                die "strobe with $port failed (log: $RUN_DIR/$rx-r$r.log)"
            python3 "$BENCH_DIR/rxcountlib.py" row "$report" --receiver "$rx" --round "$r" >>"$RAW"
            log "round $r: $rx: $(tail -n 1 "$RAW")"
        done
    done
    taskset -c "$STROBE_CPU" "$cost_bin" "$RXCOUNT_REPEAT" "$RXCOUNT_ROUNDS" >"$RUN_DIR/cost.jsonl" ||
        die "xdp_count_cost failed"
    python3 "$BENCH_DIR/rxcountlib.py" markdown "$RAW" --cost "$RUN_DIR/cost.jsonl" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct rxcount "$@"
