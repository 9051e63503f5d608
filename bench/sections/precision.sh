#!/usr/bin/env bash
# bench/sections/precision.sh — bench/run precision:
#   rate precision at 100 and 500 kpps vs iperf3 and trafgen
#
# bench/run precision runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# Section: precision — rate precision at the receiving veth, tcpdump with ns timestamps.

PRECISION_CASES=(strobe strobe-catchup strobe-smooth iperf3 iperf3-timer1 trafgen)

# precision_run CASE ROUND RATE SECONDS
precision_run() {
    local case="$1" round="$2" rate="$3" secs="$4"
    local base="$RUN_DIR/$case-${rate}pps-r$round"
    local count=$((rate * secs)) extra=()
    capture_start "$base.pcap" "$base.tcpdump.log"
    case "$case" in
    strobe | strobe-catchup | strobe-smooth)
        # The plain case is --late shift (the default when §3 was measured; smooth now).
        [[ "$case" == strobe ]] && extra=(--late shift)
        [[ "$case" == strobe-catchup ]] && extra=(--late catch-up)
        [[ "$case" == strobe-smooth ]] && extra=(--late smooth)
        # strobe gets the sink's core as well: it pins its transmit worker to the higher
        # one (STROBE_CPU) and keeps its watching main thread off it.
        in_background taskset -c "$SINK_CPU,$STROBE_CPU" "$STROBE" gen -q --lab "$LAB_PREFIX" --port lab:tx \
            --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --rate "$rate" \
            --count "$count" "${extra[@]}" --json "$base.json" >"$base.txt" 2>&1 || {
            cat "$base.txt" >&2
            die "strobe ($case, $rate pps) failed (log: $base.txt)"
        }
        python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["ports"][0]["core"] != int(sys.argv[2]))' \
            "$base.json" "$STROBE_CPU" || die "strobe's transmit worker did not run on CPU $STROBE_CPU ($base.json)"
        extra=(--strobe-report "$base.json")
        ;;
    iperf3 | iperf3-timer1)
        # -b is the UDP payload's bit rate; the default pacing timer is 1000 µs.
        [[ "$case" == iperf3-timer1 ]] && extra=(--pacing-timer 1)
        in_background ip netns exec "$TX_NS" iperf3 -c "$DST_IP" -u -b "$((rate * PAYLOAD_BYTES * 8))" \
            -l "$PAYLOAD_BYTES" -t "$secs" -A "$STROBE_CPU" "${extra[@]}" -J >"$base.json" 2>&1 || {
            cat "$base.json" >&2
            die "iperf3 client ($case, $rate pps) failed (log: $base.json)"
        }
        extra=(--sent "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum"]["packets"])' "$base.json")")
        ;;
    trafgen)
        start_trafgen "$base.log" --conf "$RUN_DIR/frame-rx0.trafgen" --num "$count" --rate "${rate}pps"
        check_trafgen_cpu
        local rc=0
        wait "$TRAFGEN_PID" || rc=$?
        untrack "$TRAFGEN_PID"
        ((rc == 0)) || die "trafgen ($rate pps) exited with status $rc (log: $base.log)"
        extra=(--sent "$count")
        ;;
    *) die "unknown precision case '$case'" ;;
    esac
    capture_stop "$base.tcpdump.log"
    "$STROBE" analyze "$base.pcap" --expect "cbr:$rate" --json >"$base.analysis.json" ||
        die "strobe analyze $base.pcap failed"
    python3 "$LIVE" precision-row "$base.analysis.json" --case "$case" --round "$round" \
        --rate "$rate" --tcpdump-log "$base.tcpdump.log" "${extra[@]}" >>"$RAW"
    ((KEEP_CAPTURES)) || rm -f "$base.pcap"
    log "$(tail -n 1 "$RAW" | python3 -c '
import json, sys
r = json.load(sys.stdin)
sent = r.get("frames_sent")
print("%-15s %4.0fk r%d  %8.3f kpps  error %+8.4f %%  %6.2f %% within 1 us  %6.2f %% within 100 ns  %d frames%s" % (
    r["case"], r["target_pps"] / 1e3, r["round"], r["achieved_pps"] / 1e3, r["rate_error_pct"],
    100 * r["within_1us"], 100 * r["within_100ns"], r["frames"],
    "" if sent is None else " of %d sent" % sent))')"
}

section_precision() {
    require_root precision
    ensure_tool tcpdump tcpdump
    ensure_tool iperf3 iperf3
    ensure_tool trafgen netsniff-ng
    need_tool taskset
    build_strobe
    new_run_dir precision
    lab_up
    ((STROBE_CPU > SINK_CPU)) ||
        die "precision: STROBE_CPU ($STROBE_CPU) must be above SINK_CPU ($SINK_CPU): strobe pins its transmitter to the highest core it may use"
    rx_steering "$PRECISION_RPS"
    write_trafgen_config "$RUN_DIR/frame-rx0.trafgen" "$RX_MAC"

    # One iperf3 server for every iperf3 run, on the sink's core.
    ip netns exec "$RX_NS" iperf3 -s -A "$SINK_CPU" >"$RUN_DIR/iperf3-server.log" 2>&1 &
    local server=$!
    track "$server"
    local tenths=0
    until ip netns exec "$RX_NS" ss -Hltn 'sport = :5201' | grep -q .; do
        alive "$server" || die "iperf3 -s exited (log: $RUN_DIR/iperf3-server.log)"
        ((tenths < 100)) || die "iperf3 -s did not listen within 10 s"
        sleep 0.1
        tenths=$((tenths + 1))
    done

    local r c
    for ((r = 1; r <= PRECISION_ROUNDS; r++)); do
        for c in "${PRECISION_CASES[@]}"; do
            precision_run "$c" "$r" 100000 "$PRECISION_DURATION"
        done
    done
    for ((r = 1; r <= PRECISION_ROUNDS; r++)); do
        for c in "${PRECISION_CASES[@]}"; do
            precision_run "$c" "$r" 500000 "$PRECISION_FAST_DURATION"
        done
    done
    finish "$server" || true

    python3 "$LIVE" summarize-precision "$RAW" "$RUN_DIR/summary.json" --target-rate 100000 \
        --max-rate-error-pct 0.01 --min-within-1us 0.99 \
        --meta "$(live_meta rounds "$PRECISION_ROUNDS" rx_steering "$PRECISION_RPS" duration_100kpps_s "$PRECISION_DURATION" \
            duration_500kpps_s "$PRECISION_FAST_DURATION" \
            iperf3 "$(iperf3 --version | head -n 1)" trafgen "$(trafgen --version | head -n 1)" \
            tcpdump "$(tcpdump --version 2>&1 | head -n 1)")"
    python3 "$LIVE" markdown-precision "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct precision "$@"
