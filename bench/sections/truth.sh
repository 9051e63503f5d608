#!/usr/bin/env bash
# bench/sections/truth.sh — bench/run truth:
#   strobe's latency through a bridge vs tcpdump/tshark ground truth
#
# bench/run truth runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# Only the flow's frames, in every truth capture.
TRUTH_FILTER="udp and src host $SRC_IP and dst host $DST_IP and dst port $DST_PORT"

# truth_capture NETNS DEV in|out BASE — tcpdump with ns timestamps on DEV (SINK_CPU);
# sets TRUTH_CAPTURE_PID once it listens.
truth_capture() {
    ip netns exec "$1" taskset -c "$SINK_CPU" tcpdump -i "$2" -Q "$3" -n -B 65536 \
        --time-stamp-precision=nano -w "$4.pcap" "$TRUTH_FILTER" 2>"$4.tcpdump.log" &
    TRUTH_CAPTURE_PID=$!
    track "$TRUTH_CAPTURE_PID"
    wait_for_line "$4.tcpdump.log" 'listening on' "$TRUTH_CAPTURE_PID" "tcpdump on $2"
}

# truth_run ROUND CALIBRATION — one strobe run through the bridge, captured where the
# frames enter the DUT (dut0), leave it (dut1) and reach strobe's receiver (rx0).
truth_run() {
    local round="$1" cal="$2"
    local base="$RUN_DIR/truth-r$round" captures=() points=(dut0 dut1 rx0) p
    truth_capture "$TRUTH_LAB_PREFIX-dut" dut0 in "$base.dut0"
    captures+=("$TRUTH_CAPTURE_PID")
    truth_capture "$TRUTH_LAB_PREFIX-dut" dut1 out "$base.dut1"
    captures+=("$TRUTH_CAPTURE_PID")
    truth_capture "$TRUTH_LAB_PREFIX-rx" rx0 in "$base.rx0"
    captures+=("$TRUTH_CAPTURE_PID")
    if ! in_background "$STROBE" gen -q --lab "$TRUTH_LAB_PREFIX" --port lab:tx --rx lab:rx \
        --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --rate "$TRUTH_RATE" \
        --count "$TRUTH_COUNT" --calibration "$cal" --json "$base.json" >"$base.txt" 2>&1; then
        cat "$base.txt" >&2
        die "strobe gen (truth, round $round) failed (log: $base.txt)"
    fi
    # libpcap hands a partly filled ring block over only after its 1 s timeout.
    sleep 1.5
    for p in "${captures[@]}"; do
        finish "$p" || die "tcpdump exited with an error (logs: $base.*.tcpdump.log)"
    done
    python3 "$LAT" truth-row --ingress "$base.dut0.pcap" --egress "$base.dut1.pcap" \
        --sink "$base.rx0.pcap" --ingress-log "$base.dut0.tcpdump.log" \
        --egress-log "$base.dut1.tcpdump.log" --sink-log "$base.rx0.tcpdump.log" \
        --dst-port "$DST_PORT" --strobe-report "$base.json" --round "$round" >>"$RAW"
    if ! ((KEEP_CAPTURES)); then
        for p in "${points[@]}"; do
            rm -f "$base.$p.pcap"
        done
    fi
    log "$(tail -n 1 "$RAW" | python3 -c '
import json, sys
r = json.load(sys.stdin)
t, c = r["truth_ns"], r["strobe_corrected_ns"]
print("truth r%d  p50 / p99 / p99.9 (us): ground truth %.2f / %.2f / %.2f, strobe corrected %.2f / %.2f / %.2f; %d frames matched" % (
    r["round"], t["p50"] / 1e3, t["p99"] / 1e3, t["p99_9"] / 1e3, c["p50"] / 1e3, c["p99"] / 1e3,
    c["p99_9"] / 1e3, r["matched_through_dut"]))')"
}

section_truth() {
    require_root truth
    ensure_tool tcpdump tcpdump
    ensure_tool tshark tshark
    need_tool taskset
    build_strobe
    new_run_dir truth
    lab_up
    rx_steering lab
    # strobe's own path (send call, one veth hop, receive timestamp) over the cable lab,
    # measured the way the truth runs measure.
    local cal="$RUN_DIR/calibration.json"
    if ! in_background "$STROBE" calibrate --lab "$LAB_PREFIX" --rate "$TRUTH_RATE" \
        --count "$TRUTH_COUNT" --out "$cal" >"$RUN_DIR/calibrate.txt" 2>&1; then
        cat "$RUN_DIR/calibrate.txt" >&2
        die "strobe calibrate --lab $LAB_PREFIX failed (log: $RUN_DIR/calibrate.txt)"
    fi
    log "$(grep -m 1 'calibration stored' "$RUN_DIR/calibrate.txt" || echo 'calibration stored')"
    truth_lab_up
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        truth_run "$r" "$cal"
    done
    python3 "$LAT" summarize-truth "$RAW" "$RUN_DIR/summary.json" \
        --meta "$(live_meta rounds "$ROUNDS" count "$TRUTH_COUNT" rate_pps "$TRUTH_RATE" \
            truth_lab_prefix "$TRUTH_LAB_PREFIX" calibration_offset_ns \
            "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["offset_ns"])' "$cal")" \
            tcpdump "$(tcpdump --version 2>&1 | head -n 1)" tshark "$(tshark --version 2>/dev/null | head -n 1)")"
    python3 "$LAT" markdown-truth "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct truth "$@"
