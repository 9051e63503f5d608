#!/usr/bin/env bash
# bench/sections/rtt.sh — bench/run rtt:
#   round-trip latency over a veth cable: strobe gen + strobe reflect
#   (AF_XDP, AF_PACKET) vs sockperf ping-pong
#
# bench/run rtt runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# sockperf's 64-byte messages make 106-byte frames on the veth (14 Ethernet + 20 IPv4 +
# 8 UDP + 64), 110 with the FCS, which is how strobe's --size counts: both send the same.
SOCKPERF_MSG_BYTES=64
RTT_FRAME_SIZE=$((14 + 20 + 8 + SOCKPERF_MSG_BYTES + 4))

# The issue's target: strobe's round trip against sockperf's (ratios of medians).

RTT_MAX_MEDIAN_RATIO=0.2
RTT_MAX_P999_RATIO=0.5

# "${COUNTED[@]}" FILE COMMAND... — COMMAND under GNU time, which writes how often the
# kernel preempted it (involuntary context switches, all threads) to FILE: the direct
# measure of how much a busy-polling tool had to share its core. time ignores SIGINT while
# it waits and finish signals COMMAND (its child) first, so stopping works as without it.
# An array, not a function: a backgrounded function would run in a subshell that
# ignores SIGINT and stands between finish and COMMAND.
COUNTED=(/usr/bin/time -f %c -o)

# last_rtt_line — the last rtt measurement, for the log.
last_rtt_line() {
    tail -n 1 "$RAW" | python3 -c '
import json, sys
r = json.load(sys.stdin)
t = r["rtt_ns"]
print("%-16s r%d  RTT p50 %7.2f  p99 %8.2f  p99.9 %8.2f  p99.99 %8.2f  max %9.2f us  (%d observations, lost %s, preempted %d / %d)" % (
    r["case"], r["round"], t["p50"] / 1e3, t["p99"] / 1e3, t["p99_9"] / 1e3, t["p99_99"] / 1e3,
    t["max"] / 1e3, r["observations"], r["lost"], r["preempted"]["server"], r["preempted"]["client"]))'
}

# rtt_strobe CASE ROUND PORT — strobe reflect on PORT (the rx side, RTT_SERVER_CPU, busy
# polling) while strobe gen sends from lab:tx and receives the reflections there
# (RTT_CLIENT_CPU), one frame every 1/RTT_RATE s.
rtt_strobe() {
    local case="$1" round="$2" port="$3"
    local base="$RUN_DIR/$case-r$round"
    "${COUNTED[@]}" "$base.reflect.preempted" taskset -c "$RTT_SERVER_CPU" "$STROBE" reflect \
        --lab "$LAB_PREFIX" "$port" --busy-poll --json "$base.reflect.json" >"$base.reflect.txt" 2>&1 &
    local reflector=$!
    track "$reflector"
    # Printed once the port is open (for AF_XDP: the XDP program attached).
    wait_for_line "$base.reflect.txt" 'reflecting on' "$reflector" "strobe reflect $port"
    if ! in_background "${COUNTED[@]}" "$base.preempted" taskset -c "$RTT_CLIENT_CPU" "$STROBE" gen -q \
        --lab "$LAB_PREFIX" --port lab:tx --rx lab:tx --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" \
        --size "$RTT_FRAME_SIZE" --rate "$RTT_RATE" --count "$((RTT_RATE * RTT_SECONDS))" \
        --json "$base.json" >"$base.txt" 2>&1; then
        cat "$base.txt" >&2
        die "strobe gen ($case, round $round) failed (log: $base.txt)"
    fi
    finish_strobe "$reflector" || die "strobe reflect ($case, round $round) failed (log: $base.reflect.txt)"
    python3 "$LAT" rtt-strobe "$base.json" --reflector "$base.reflect.json" --case "$case" \
        --round "$round" --server-preempted "$base.reflect.preempted" \
        --client-preempted "$base.preempted" >>"$RAW"
    log "$(last_rtt_line)"
}

# rtt_sockperf CASE ROUND [OPTION...] — sockperf server in the rx namespace
# (RTT_SERVER_CPU) and ping-pong from the tx namespace (RTT_CLIENT_CPU) for RTT_SECONDS,
# both with OPTIONs; full round trips (--full-rtt).
rtt_sockperf() {
    local case="$1" round="$2"
    shift 2
    local base="$RUN_DIR/$case-r$round"
    "${COUNTED[@]}" "$base.server.preempted" ip netns exec "$RX_NS" taskset -c "$RTT_SERVER_CPU" \
        sockperf server -i "$DST_IP" -p "$SOCKPERF_PORT" "$@" >"$base.server.log" 2>&1 &
    local server=$!
    track "$server"
    local tenths=0
    until ip netns exec "$RX_NS" ss -Hlun "sport = :$SOCKPERF_PORT" | grep -q .; do
        alive "$server" || {
            cat "$base.server.log" >&2
            die "sockperf server exited before listening (log: $base.server.log)"
        }
        ((tenths < 100)) || die "sockperf server did not listen on UDP $SOCKPERF_PORT within 10 s"
        sleep 0.1
        tenths=$((tenths + 1))
    done
    if ! in_background "${COUNTED[@]}" "$base.preempted" ip netns exec "$TX_NS" taskset -c "$RTT_CLIENT_CPU" \
        sockperf ping-pong -i "$DST_IP" -p "$SOCKPERF_PORT" -m "$SOCKPERF_MSG_BYTES" -t "$RTT_SECONDS" --full-rtt \
        "$@" >"$base.log" 2>&1; then
        tail -n 20 "$base.log" >&2
        die "sockperf ping-pong ($case, round $round) failed (log: $base.log)"
    fi
    finish "$server" || die "sockperf server ($case, round $round) failed (log: $base.server.log)"
    python3 "$LAT" rtt-sockperf "$base.log" --case "$case" --round "$round" \
        --server-preempted "$base.server.preempted" --client-preempted "$base.preempted" >>"$RAW"
    log "$(last_rtt_line)"
}

section_rtt() {
    require_root rtt
    ensure_tool sockperf sockperf
    ensure_tool /usr/bin/time time
    need_tool taskset
    build_strobe
    new_run_dir rtt
    lab_up
    rx_steering lab
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        rtt_strobe strobe-afxdp "$r" lab:rx@afxdp
        rtt_sockperf sockperf "$r"
        rtt_strobe strobe-afpacket "$r" lab:rx
        # Both sides spin on a non-blocking socket, as strobe's --busy-poll reflector does.
        rtt_sockperf sockperf-busy "$r" --nonblocked
    done
    python3 "$LAT" summarize-rtt "$RAW" "$RUN_DIR/summary.json" --target-peer sockperf \
        --max-median-ratio "$RTT_MAX_MEDIAN_RATIO" --max-p999-ratio "$RTT_MAX_P999_RATIO" \
        --meta "$(live_meta rounds "$ROUNDS" rtt_seconds "$RTT_SECONDS" strobe_rate_pps "$RTT_RATE" \
            frame_size "$RTT_FRAME_SIZE" sockperf_msg_bytes "$SOCKPERF_MSG_BYTES" \
            server_cpu "$RTT_SERVER_CPU" client_cpu "$RTT_CLIENT_CPU" \
            sockperf "$(sockperf --version 2>&1 | grep -m 1 -o 'version [^ ]*')")"
    python3 "$LAT" markdown-rtt "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct rtt "$@"
