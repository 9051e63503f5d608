#!/usr/bin/env bash
# bench/sections/pacing.sh — bench/run pacing:
#   low-rate pacing on a noisy host (issue #27): strobe on the null port at
#   1/10/100 kpps beside cyclictest on the same core (late frames vs
#   wake-ups beyond strobe's spin margin), and CBR at 100 kpps on the
#   veth (gaps within ±1 µs); with PACING_BEFORE, an older build too
#
# bench/run pacing runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# Section: pacing — low-rate pacing on a noisy host (issue #27). strobe on the null port
# with cyclictest on the same core at the same time: strobe's late frames beside the
# wake-ups cyclictest saw later than strobe's spin margin (what a sleeping sender with that
# margin would have missed). Then CBR on the veth, judged from a capture at rx0.

PACING_ROUNDS="${PACING_ROUNDS:-1}"
PACING_SECONDS="${PACING_SECONDS:-10}"
PACING_RATES="${PACING_RATES:-1000,10000,100000}"
PACING_CBR_RATE="${PACING_CBR_RATE:-100000}"
PACING_CBR_SECONDS="${PACING_CBR_SECONDS:-5}"
PACING_CYCLICTEST_PRIO="${PACING_CYCLICTEST_PRIO:-1}"
PACING_BEFORE="${PACING_BEFORE:-}"
PACINGLIB="$BENCH_DIR/pacinglib.py"

# pacing_null BUILD BINARY ROUND RATE — one null-port run with cyclictest beside it.
pacing_null() {
    local build="$1" bin="$2" round="$3" rate="$4"
    local base="$RUN_DIR/null-$build-${rate}-r$round" ct
    # -h: a per-µs histogram up to 20 ms, printed when SIGINT stops it after strobe's run.
    cyclictest -m -q -a "$STROBE_CPU" -t1 -p "$PACING_CYCLICTEST_PRIO" -i 1000 -h 20000 \
        >"$base.cyclictest" 2>&1 &
    ct=$!
    track "$ct"
    # strobe gets the sink's core too: it pins its transmitter to the higher (STROBE_CPU)
    # and keeps its watching main thread off it.
    in_background taskset -c "$SINK_CPU,$STROBE_CPU" "$bin" gen -q --port null \
        --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --rate "$rate" \
        --duration "${PACING_SECONDS}s" --json "$base.json" >"$base.txt" 2>&1 || {
        cat "$base.txt" >&2
        die "strobe ($build, null, $rate pps) failed (log: $base.txt)"
    }
    finish "$ct" 5 || true
    grep -q '^# Total:' "$base.cyclictest" || die "cyclictest printed no histogram ($base.cyclictest)"
    python3 "$PACINGLIB" null-row "$base.json" --build "$build" --round "$round" --rate "$rate" \
        --cyclictest "$base.cyclictest" >>"$RAW"
    log "$(tail -n 1 "$RAW" | python3 "$PACINGLIB" log)"
}

# pacing_cbr BUILD BINARY ROUND — CBR on the veth, captured at rx0 with ns timestamps.
pacing_cbr() {
    local build="$1" bin="$2" round="$3" rate="$PACING_CBR_RATE"
    local base="$RUN_DIR/cbr-$build-${rate}-r$round"
    capture_start "$base.pcap" "$base.tcpdump.log" "$WIRE_FILTER"
    in_background taskset -c "$SINK_CPU,$STROBE_CPU" "$bin" gen -q --lab "$LAB_PREFIX" --port lab:tx \
        --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --rate "$rate" \
        --duration "${PACING_CBR_SECONDS}s" --json "$base.json" >"$base.txt" 2>&1 || {
        cat "$base.txt" >&2
        die "strobe ($build, veth CBR, $rate pps) failed (log: $base.txt)"
    }
    capture_stop "$base.tcpdump.log"
    "$STROBE" analyze "$base.pcap" --expect "cbr:$rate" --json >"$base.analysis.json" ||
        die "strobe analyze $base.pcap failed"
    ((KEEP_CAPTURES)) || rm -f "$base.pcap"
    python3 "$PACINGLIB" cbr-row "$base.json" --build "$build" --round "$round" --rate "$rate" \
        --analysis "$base.analysis.json" >>"$RAW"
    log "$(tail -n 1 "$RAW" | python3 "$PACINGLIB" log)"
}

section_pacing() {
    require_root pacing
    ensure_tool cyclictest rt-tests
    ensure_tool tcpdump tcpdump
    need_tool taskset
    build_strobe
    [[ -z "$PACING_BEFORE" || -x "$PACING_BEFORE" ]] ||
        die "PACING_BEFORE ($PACING_BEFORE) is not an executable strobe"
    new_run_dir pacing
    ((STROBE_CPU > SINK_CPU)) ||
        die "pacing: STROBE_CPU ($STROBE_CPU) must be above SINK_CPU ($SINK_CPU): strobe pins its transmitter to the highest core it may use"
    local rates builds=() r rate b
    mapfile -t rates < <(wire_list PACING_RATES "$PACING_RATES")
    require_positive_int PACING_CBR_RATE "$PACING_CBR_RATE"
    [[ -z "$PACING_BEFORE" ]] || builds+=("before=$PACING_BEFORE")
    builds+=("after=$STROBE")
    for ((r = 1; r <= PACING_ROUNDS; r++)); do
        for rate in "${rates[@]}"; do
            for b in "${builds[@]}"; do
                pacing_null "${b%%=*}" "${b#*=}" "$r" "$rate"
            done
        done
    done
    lab_up
    rx_steering "$PRECISION_RPS"
    for ((r = 1; r <= PACING_ROUNDS; r++)); do
        for b in "${builds[@]}"; do
            pacing_cbr "${b%%=*}" "${b#*=}" "$r"
        done
    done
    python3 "$PACINGLIB" summarize "$RAW" "$RUN_DIR/summary.json" \
        --meta "$(live_meta rounds "$PACING_ROUNDS" null_seconds "$PACING_SECONDS" \
            cbr_seconds "$PACING_CBR_SECONDS" cyclictest_prio "$PACING_CYCLICTEST_PRIO" \
            before "${PACING_BEFORE:-none}" \
            cyclictest "$(dpkg-query -W -f='${Version}' rt-tests 2>/dev/null || echo unknown)")" \
        >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct pacing "$@"
