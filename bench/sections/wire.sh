#!/usr/bin/env bash
# bench/sections/wire.sh — bench/run wire:
#   timing on the wire: Poisson at 10k/100k/500k pps (AF_PACKET, AF_XDP)
#   vs D-ITG, a burst train, CBR at 500 kpps and 1 Mpps with the default
#   batch and --batch 1, and each path's unpaced rate
#
# bench/run wire runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# Section: wire — timing on the wire (issue #15): Poisson keeps its distribution, paced CBR
# reaches the path's rate, trains stay trains. tcpdump at rx0 as in the precision section.

# D-ITG's smallest payload (its own header) is 20 bytes: 62-byte frames at rx0.
DITG_PAYLOAD_BYTES=18

# wire_port BACKEND — gen's options for the lab's transmit port over BACKEND, one a line
# (xdp-live-engine: xdp-live with frames the engine writes, paced from user space).
wire_port() {
    case "$1" in
    afpacket) printf '%s\n' --port lab:tx ;;
    afxdp) printf '%s\n' --port lab:tx@afxdp ;;
    xdp-live) printf '%s\n' --port lab:tx@xdp-live ;;
    xdp-live-engine) printf '%s\n' --port lab:tx@xdp-live --engine-frames ;;
    *) die "WIRE_BACKENDS: unknown backend '$1' (accepted: afpacket, afxdp, xdp-live, xdp-live-engine)" ;;
    esac
}

# wire_analyze PCAP OUT KIND RATE — strobe analyze --json for KIND (poisson, cbr, burst),
# with the floor-aware fit when this build's analyze has one.
wire_analyze() {
    local pcap="$1" out="$2" kind="$3" rate="$4" args=()
    case "$kind" in
    poisson) args=(--expect "poisson:$rate") ;;
    cbr) args=(--expect "cbr:$rate") ;;
    burst) args=(--burst-gap "$WIRE_BURST_GAP_NS") ;;
    esac
    if [[ "$kind" == poisson ]] && ((ANALYZE_HAS_FLOOR)); then
        args+=(--floor "$WIRE_FLOOR" --tolerance "$WIRE_TOLERANCE")
    fi
    "$STROBE" analyze "$pcap" "${args[@]}" --json >"$out" ||
        die "strobe analyze $pcap ${args[*]} failed"
}

# wire_row KIND CASE BACKEND ROUND RATE BASE [wire-row options...] — analyse BASE.pcap, append
# the row to RAW, log it and drop the capture.
wire_row() {
    local kind="$1" case="$2" backend="$3" round="$4" rate="$5" base="$6"
    shift 6
    wire_analyze "$base.pcap" "$base.analysis.json" "$kind" "$rate"
    python3 "$LIVE" wire-row "$base.analysis.json" --kind "$kind" --case "$case" \
        --backend "$backend" --round "$round" --rate "$rate" --pcap "$base.pcap" \
        --tcpdump-log "$base.tcpdump.log" --burst-gap-ns "$WIRE_BURST_GAP_NS" "$@" >>"$RAW"
    ((KEEP_CAPTURES)) || rm -f "$base.pcap"
    log "$(tail -n 1 "$RAW" | python3 "$LIVE" wire-log)"
}

# gro_off_after BACKEND — lab:tx@xdp-live turns GRO on at rx0 (a veth takes XDP frames only
# then); the other backends' runs are measured without it, as before.
gro_off_after() {
    [[ "$1" != xdp-live* ]] ||
        ip netns exec "$RX_NS" ethtool -K rx0 gro off >/dev/null || die "cannot turn rx0's GRO off"
}

# wire_strobe KIND CASE BACKEND ROUND RATE [gen options...] — one captured strobe run.
wire_strobe() {
    local kind="$1" case="$2" backend="$3" round="$4" rate="$5"
    shift 5
    local base="$RUN_DIR/$kind-$case-${rate}-r$round" t0 t1 port_args gen_args=() row_args=()
    # gen's options, then after a lone `--` wire-row's.
    while (($#)) && [[ "$1" != -- ]]; do gen_args+=("$1"); shift; done
    (($#)) && shift
    row_args=("$@")
    set -- "${gen_args[@]}"
    mapfile -t port_args < <(wire_port "$backend")
    capture_start "$base.pcap" "$base.tcpdump.log" "$WIRE_FILTER"
    t0="$(date +%s%N)"
    # The sink's core as well, as in the precision section: strobe pins its transmit worker
    # to the higher one (STROBE_CPU).
    in_background taskset -c "$SINK_CPU,$STROBE_CPU" "$STROBE" gen -q --lab "$LAB_PREFIX" \
        "${port_args[@]}" --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 \
        --json "$base.json" "$@" >"$base.txt" 2>&1 || {
        cat "$base.txt" >&2
        die "strobe ($kind, $case, $backend) failed (log: $base.txt)"
    }
    t1="$(date +%s%N)"
    python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["ports"][0]["core"] != int(sys.argv[2]))' \
        "$base.json" "$STROBE_CPU" || die "strobe's transmit worker did not run on CPU $STROBE_CPU ($base.json)"
    capture_stop "$base.tcpdump.log"
    gro_off_after "$backend"
    wire_row "$kind" "$case" "$backend" "$round" "$rate" "$base" \
        --strobe-report "$base.json" --wall-ns "$((t1 - t0))" "${row_args[@]}"
}

# wire_ditg ROUND RATE — D-ITG's Poisson (exponential inter-departure times, busy-waiting
# below 1 ms) to the ITGRecv in the receiving namespace.
wire_ditg() {
    local round="$1" rate="$2"
    local base="$RUN_DIR/poisson-ditg-${rate}-r$round" frames=$((WIRE_GAPS + 1)) t0 t1
    # Time enough for D-ITG at a tenth of the asked rate; it counts frames, not time.
    local limit=$((frames * 10 / rate + 30))
    capture_start "$base.pcap" "$base.tcpdump.log" "$WIRE_FILTER"
    t0="$(date +%s%N)"
    # -sp is left out: with it, this D-ITG fails to open its socket (EAFNOSUPPORT). The
    # seed must lie in (0, 1).
    if ! in_background ip netns exec "$TX_NS" taskset -c "$STROBE_CPU" timeout "$limit" \
        ITGSend -a "$DST_IP" -T UDP -rp "$DST_PORT" -E "$rate" -c "$DITG_PAYLOAD_BYTES" \
        -z "$frames" -poll -s 0.5 >"$base.log" 2>&1 || grep -q 'Error' "$base.log"; then
        tail -n 5 "$base.log" >&2
        capture_stop "$base.tcpdump.log"
        rm -f "$base.pcap"
        log "D-ITG at $rate pps did not run through (log: $base.log); no row"
        return 0
    fi
    t1="$(date +%s%N)"
    capture_stop "$base.tcpdump.log"
    wire_row poisson d-itg sockets "$round" "$rate" "$base" --sent "$frames" --wall-ns "$((t1 - t0))"
}

# wire_unpaced BACKEND ROUND — the path's unpaced rate with the paced runs' frame, cores,
# destination and capture (with receive steering off, rx0's stack and tcpdump's copy run
# on the sending core, so the capture is part of the path): frames counted at rx0 over
# strobe's own transmit time.
wire_unpaced() {
    local backend="$1" round="$2"
    local base="$RUN_DIR/unpaced-strobe-$backend-r$round" before after port_args
    mapfile -t port_args < <(wire_port "$backend")
    capture_start "$base.pcap" "$base.tcpdump.log" "$WIRE_FILTER"
    before="$(rx_packets)"
    in_background taskset -c "$SINK_CPU,$STROBE_CPU" "$STROBE" gen -q --lab "$LAB_PREFIX" \
        "${port_args[@]}" --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 \
        --rate max --duration "${WIRE_UNPACED_SECONDS}s" --json "$base.json" >"$base.txt" 2>&1 || {
        cat "$base.txt" >&2
        die "strobe unpaced ($backend) failed (log: $base.txt)"
    }
    after="$(rx_packets)"
    capture_stop "$base.tcpdump.log"
    gro_off_after "$backend"
    rm -f "$base.pcap"
    python3 "$LIVE" wire-unpaced-row "$base.json" --backend "$backend" --round "$round" \
        --rx-frames "$((after - before))" --tcpdump-log "$base.tcpdump.log" >>"$RAW"
    log "$(tail -n 1 "$RAW" | python3 "$LIVE" wire-log)"
}

section_wire() {
    require_root wire
    ensure_tool tcpdump tcpdump
    ensure_tool ethtool ethtool
    if ! command -v ITGSend >/dev/null 2>&1; then
        # shellcheck source=../../scripts/lib.sh
        source "$ROOT/scripts/lib.sh"
        need_apt d-itg || die "cannot install d-itg (ITGSend, ITGRecv)"
    fi
    need_tool ITGSend
    need_tool ITGRecv
    need_tool taskset
    need_tool timeout
    build_strobe
    new_run_dir wire
    lab_up
    ((STROBE_CPU > SINK_CPU)) ||
        die "wire: STROBE_CPU ($STROBE_CPU) must be above SINK_CPU ($SINK_CPU): strobe pins its transmitter to the highest core it may use"
    rx_steering "$PRECISION_RPS"
    # analyze gains floor-aware Poisson fits with --floor; without it the plain fit only.
    ANALYZE_HAS_FLOOR=0
    local analyze_help
    analyze_help="$("$STROBE" analyze --help)" || die "strobe analyze --help failed"
    [[ "$analyze_help" == *--floor* ]] && ANALYZE_HAS_FLOOR=1
    log "strobe analyze --floor: $( ((ANALYZE_HAS_FLOOR)) && echo "yes ($WIRE_FLOOR)" || echo "not in this build")"

    local backends poisson_rates ditg_rates cbr_rates b r rate
    mapfile -t backends < <(printf '%s\n' ${WIRE_BACKENDS//,/ })
    for b in "${backends[@]}"; do wire_port "$b" >/dev/null; done
    mapfile -t poisson_rates < <(wire_list WIRE_POISSON_RATES "$WIRE_POISSON_RATES")
    mapfile -t ditg_rates < <(wire_list WIRE_DITG_RATES "$WIRE_DITG_RATES")
    mapfile -t cbr_rates < <(wire_list WIRE_CBR_RATES "$WIRE_CBR_RATES")

    # One ITGRecv for every D-ITG run, on the sink's core; it listens for its signalling
    # on TCP port 9000.
    local itgrecv=""
    if ((${#ditg_rates[@]})); then
        ip netns exec "$RX_NS" taskset -c "$SINK_CPU" ITGRecv >"$RUN_DIR/itgrecv.log" 2>&1 &
        itgrecv=$!
        track "$itgrecv"
        local tenths=0
        until ip netns exec "$RX_NS" ss -Hltn 'sport = :9000' | grep -q .; do
            alive "$itgrecv" || die "ITGRecv exited (log: $RUN_DIR/itgrecv.log)"
            ((tenths < 100)) || die "ITGRecv did not listen within 10 s"
            sleep 0.1
            tenths=$((tenths + 1))
        done
    fi

    for ((r = 1; r <= WIRE_ROUNDS; r++)); do
        for b in "${backends[@]}"; do
            wire_unpaced "$b" "$r"
            if [[ "$WIRE_CEILING_FRACTION" != 0 ]]; then
                # The unpaced row just written: this path's ceiling in this round.
                rate="$(tail -n 1 "$RAW" | python3 -c 'import json,sys; print(int(json.loads(sys.stdin.read())["achieved_pps"] * float(sys.argv[1])))' "$WIRE_CEILING_FRACTION")" ||
                    die "cannot read the unpaced rate of $b from $RAW"
                wire_strobe cbr "strobe-$b-ceiling" "$b" "$r" "$rate" --rate "$rate" \
                    --duration "${WIRE_CBR_SECONDS}s" ${WIRE_CEILING_LATE:+--late "$WIRE_CEILING_LATE"} \
                    -- --ceiling-fraction "$WIRE_CEILING_FRACTION" \
                    --asked-seconds "$WIRE_CBR_SECONDS"
            fi
        done
        for rate in "${poisson_rates[@]}"; do
            for b in "${backends[@]}"; do
                wire_strobe poisson "strobe-$b" "$b" "$r" "$rate" --pattern poisson \
                    --rate "$rate" --count "$((WIRE_GAPS + 1))"
            done
        done
        for rate in "${ditg_rates[@]}"; do
            wire_ditg "$r" "$rate"
        done
        for rate in "${cbr_rates[@]}"; do
            for b in "${backends[@]}"; do
                wire_strobe cbr "strobe-$b" "$b" "$r" "$rate" --rate "$rate" \
                    --duration "${WIRE_CBR_SECONDS}s"
                wire_strobe cbr "strobe-$b-batch1" "$b" "$r" "$rate" --rate "$rate" \
                    --duration "${WIRE_CBR_SECONDS}s" --batch 1
            done
        done
        local train="${WIRE_BURST_PATTERN#burst:}"
        for b in "${backends[@]}"; do
            wire_strobe burst "strobe-$b" "$b" "$r" "$WIRE_BURST_RATE" \
                --pattern "$WIRE_BURST_PATTERN" --rate "$WIRE_BURST_RATE" \
                --count "$((WIRE_BURST_TRAINS * ${train%%/*}))"
        done
    done
    [[ -z "$itgrecv" ]] || finish "$itgrecv" || true

    python3 "$LIVE" summarize-wire "$RAW" "$RUN_DIR/summary.json" \
        --burst-pattern "$WIRE_BURST_PATTERN" --burst-rate "$WIRE_BURST_RATE" \
        --meta "$(live_meta rounds "$WIRE_ROUNDS" rx_steering "$PRECISION_RPS" gaps_per_poisson_run "$WIRE_GAPS" \
            cbr_seconds "$WIRE_CBR_SECONDS" ceiling_fraction "$WIRE_CEILING_FRACTION" unpaced_seconds "$WIRE_UNPACED_SECONDS" \
            burst_pattern "$WIRE_BURST_PATTERN" burst_rate "$WIRE_BURST_RATE" burst_trains "$WIRE_BURST_TRAINS" \
            burst_gap_ns "$WIRE_BURST_GAP_NS" analyze_floor "$( ((ANALYZE_HAS_FLOOR)) && echo "$WIRE_FLOOR" || echo unsupported)" analyze_tolerance "$WIRE_TOLERANCE" \
            d_itg "$(dpkg-query -W -f='${Version}' d-itg 2>/dev/null || echo unknown)" \
            tcpdump "$(tcpdump --version 2>&1 | head -n 1)")"
    python3 "$LIVE" markdown-wire "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct wire "$@"
