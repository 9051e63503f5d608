#!/usr/bin/env bash
# bench/sections/trains.sh — bench/run trains:
#   the convoy of packet trains through tbf shapers of 10, 50 and
#   200 Mbit/s: bandwidth estimate vs the shaper's rate, beside
#   iperf3 UDP and TCP through the same shaper; the heads' latency vs
#   a constant-rate flow and vs every frame's (the naive method), also
#   on the cable where only the sender queues
#
# bench/run trains runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# trains_iperf3 PROTO RATE_BPS FRAME_BYTES BASE — one iperf3 run (udp at twice the shaper's
# rate with datagrams that make FRAME_BYTES frames, or tcp) through the shaper lab; the
# server's JSON (the receiver's view, every 0.5 s) goes to BASE.json.
trains_iperf3() {
    local proto="$1" rate="$2" frame="$3" base="$4" extra=()
    ip netns exec "$TRAINS_LAB_PREFIX-rx" iperf3 -s -1 -J -i 0.5 -B "$DST_IP" >"$base.json" 2>"$base.server.log" &
    local server=$! tenths=0
    track "$server"
    until ip netns exec "$TRAINS_LAB_PREFIX-rx" ss -Hltn 'sport = :5201' | grep -q .; do
        alive "$server" || die "iperf3 -s exited (log: $base.server.log)"
        ((tenths < 100)) || die "iperf3 -s did not listen within 10 s"
        sleep 0.1
        tenths=$((tenths + 1))
    done
    # UDP payload: the frame less 4 (FCS), 14 (Ethernet), 20 (IPv4) and 8 (UDP) bytes.
    [[ "$proto" == udp ]] && extra=(-u -b "$((2 * rate))" -l "$((frame - 46))")
    in_background ip netns exec "$TRAINS_LAB_PREFIX-tx" iperf3 -c "$DST_IP" "${extra[@]}" \
        -t "$TRAINS_IPERF_SECONDS" >"$base.client.log" 2>&1 ||
        die "iperf3 client ($proto) failed (log: $base.client.log)"
    local rc=0
    wait "$server" || rc=$?
    untrack "$server"
    ((rc == 0)) || die "iperf3 server ($proto) failed (log: $base.server.log)"
}

section_trains() {
    require_root trains
    ensure_tool iperf3 iperf3
    build_strobe
    new_run_dir trains
    local r case dut rate frame frames bps
    for ((r = 1; r <= TRAINS_ROUNDS; r++)); do
        for case in $TRAINS_CASES; do
            IFS=: read -r dut frame frames <<<"$case"
            bps=$(python3 -c 'import re,sys; m=re.fullmatch(r"([0-9.]+)(k|m|g)bit", sys.argv[1]); print(int(float(m[1])*{"k":1e3,"m":1e6,"g":1e9}[m[2]]))' "$dut") ||
                die "TRAINS_CASES: '$dut' is not a rate such as 50mbit"
            log "round $r: convoy, iperf3 UDP and TCP through tbf:$dut"
            trains_lab "tbf:$dut"
            local base="$RUN_DIR/$dut-$frame-$frames-r$r" shape=()
            # `-`: strobe's default (1518 B; frames: what the shaper's buffer holds, recorded
            # as 0 and read from the report).
            if [[ "$frame" == - ]]; then frame=1518; else shape+=(--size "$frame"); fi
            # `probe`: `--shaper RATE` without its buffer, which strobe measures with a first
            # short convoy before choosing the train length.
            local probe=false
            if [[ "$frames" == probe ]]; then
                frames=0 probe=true
                shape+=(--shaper "$dut")
            elif [[ "$frames" == - ]]; then frames=0; else shape+=(--frames "$frames"); fi
            in_background "$STROBE" trains convoy --lab "$TRAINS_LAB_PREFIX" "${shape[@]}" \
                --trains "$TRAINS_COUNT" --baseline --quiet --json "$base.convoy.json" --html "$base.convoy.html" \
                >"$base.convoy.log" 2>&1 ||
                die "strobe trains convoy failed (log: $base.convoy.log)"
            trains_iperf3 udp "$bps" "$frame" "$base.iperf3-udp"
            trains_iperf3 tcp "$bps" "$frame" "$base.iperf3-tcp"
            printf '{"kind":"shaper","round":%d,"rate_bps":%d,"frame_bytes":%d,"frames":%d,"probe":%s,"base":"%s"}\n' \
                "$r" "$bps" "$frame" "$frames" "$probe" "$base" >>"$RAW"
        done
        # The cable: no bottleneck, so every frame's extra latency is the sender's queue.
        lab_up
        local base="$RUN_DIR/cable-r$r"
        in_background "$STROBE" trains lengths --lab "$LAB_PREFIX" --size 1000 --lengths 10,50,100 \
            --trains "$TRAINS_COUNT" --baseline --quiet --json "$base.lengths.json" --html "$base.lengths.html" \
            >"$base.lengths.log" 2>&1 ||
            die "strobe trains lengths failed (log: $base.lengths.log)"
        printf '{"kind":"cable","round":%d,"base":"%s"}\n' "$r" "$base" >>"$RAW"
    done
    python3 "$BENCH_DIR/trainslib.py" summarize "$RAW" "$RUN_DIR/summary.json" \
        "$(machine_meta "$ROOT" strobe_built_from "$STROBE_BUILT_FROM" iperf3 "$(iperf3 --version | head -n 1)")"
    python3 "$BENCH_DIR/trainslib.py" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    python3 "$BENCH_DIR/trainslib.py" figures "$RUN_DIR" "$RUN_DIR/figures"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct trains "$@"
