#!/usr/bin/env bash
# bench/sections/rxcount.sh — bench/run rxcount:
#   receivers counting xdp-live's top rate: the same unpaced 64-byte
#   flow, generated in the kernel on tx0 with a stamp per frame, taken
#   at rx0 in turn by a bare XDP drop program (the reference: what the
#   sender reaches when receiving costs nothing), xdp-count (in the
#   kernel), AF_XDP on every queue and AF_PACKET; and the counting
#   program's cost per frame beside a bare XDP drop
#
# bench/run rxcount runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# rxcount_drop_reference ROUND SINK_BIN — the sender into a bare XDP drop program on rx0
# (examples/xdp_drop_sink.rs, held until its stdin closes). strobe receives on the rx
# namespace's loopback, where nothing arrives: it has a receive port, so it stamps every
# frame as for the counting receivers.
rxcount_drop_reference() {
    local r="$1" sink_bin="$2" fifo="$RUN_DIR/drop-hold" log="$RUN_DIR/drop-r$1.sink" pid i hold
    local report="$RUN_DIR/drop-r$r.json"
    rm -f "$fifo"
    mkfifo "$fifo" || die "cannot make $fifo"
    "$sink_bin" rx0 "$RX_NS" <"$fifo" >"$log" 2>&1 &
    pid=$!
    exec {hold}>"$fifo"
    for ((i = 0; i < 100; i++)); do
        grep -q attached "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    grep -q attached "$log" || { exec {hold}>&-; wait "$pid"; die "xdp_drop_sink did not attach to rx0: $(cat "$log")"; }
    "$STROBE" gen -q --lab "$LAB_PREFIX" --port lab:tx@xdp-live --rx "afpacket:$RX_NS/lo" \
        --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --unpaced --drain 0.1s \
        --count "$RXCOUNT_FRAMES" --json "$report" >"$RUN_DIR/drop-r$r.log" 2>&1 || {
        exec {hold}>&-
        wait "$pid"
        die "strobe into the drop program failed (log: $RUN_DIR/drop-r$r.log)"
    }
    exec {hold}>&-
    wait "$pid" || die "xdp_drop_sink failed: $(cat "$log")"
    local dropped
    dropped="$(awk '/^dropped / {print $2}' "$log")"
    [[ "$dropped" =~ ^[0-9]+$ ]] || die "xdp_drop_sink printed no count: $(cat "$log")"
    python3 "$BENCH_DIR/rxcountlib.py" row "$report" --receiver drop --round "$r" --dropped "$dropped" >>"$RAW"
    log "round $r: drop: $(tail -n 1 "$RAW")"
}

section_rxcount() {
    require_root rxcount
    need_tool taskset
    build_strobe
    (cd "$ROOT" && cargo build --release -p strobe-io --example xdp_count_cost --example xdp_drop_sink >&2) ||
        die "cargo build --release -p strobe-io --example xdp_count_cost --example xdp_drop_sink failed"
    local cost_bin="$ROOT/target/release/examples/xdp_count_cost"
    local sink_bin="$ROOT/target/release/examples/xdp_drop_sink"
    new_run_dir rxcount
    lab_up
    # Receive work where the frames arrive: no steering to the other core.
    rx_steering off
    local r rx report
    for ((r = 1; r <= RXCOUNT_ROUNDS; r++)); do
        rxcount_drop_reference "$r" "$sink_bin"
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
