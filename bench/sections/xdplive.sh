#!/usr/bin/env bash
# bench/sections/xdplive.sh — bench/run xdplive:
#   transmit rate, xdp-live (XDP live frames) beside strobe's socket
#   paths, dpdk-testpmd and trafgen, into rx0's stack; IMIX on
#   strobe's paths
#
# bench/run xdplive runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"
# shellcheck source=../lib/rate.sh
source "$BENCH_DIR/lib/rate.sh"

# imix_strobe CASE ROUND PORT [ARGS] — rate_strobe with IMIX and XDPLIVE_IMIX_VARY.
imix_strobe() {
    # shellcheck disable=SC2086 # the variation is a list of arguments
    RATE_SIZE=imix RATE_FRAME_BYTES=$IMIX_FRAME_BYTES rate_strobe "$@" $XDPLIVE_IMIX_VARY
}

# ceiling_probe ROUND — the path's ceiling: strobe's own 64-byte frame (written once to a
# pcap, with tx0's MAC) sent unchanged by a program that only redirects each page, until
# SIGINT (examples/xdp_ceiling.rs: the issue's C probe's measure), on STROBE_CPU.
ceiling_probe() {
    local round="$1" frame="$RUN_DIR/frame.pcap" out="$RUN_DIR/xdp-ceiling-r$1.log"
    if [[ ! -s "$frame" ]]; then
        "$STROBE" gen -q --port "pcap:$frame" --src-mac "$TX_MAC" --dst-mac "$SINK_MAC" \
            --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --count 1 >/dev/null ||
            die "cannot write the probe's frame to $frame"
    fi
    taskset -c "$STROBE_CPU" "$XDP_CEILING" "$TX_NS/tx0" "$frame" >"$out" 2>&1 &
    local pid=$!
    track "$pid"
    measure_and_stop xdp-ceiling "$round" "$pid" "$out"
}

# flows_strobe CASE ROUND PORT [ARGS] — strobe with XDPLIVE_FLOWS paced flows on one port
# (64-byte UDP, each at XDPLIVE_FLOW_RATE, distinct source ports, the first counting), until
# SIGINT; on STROBE_CPU, or on the CPUs in RATE_CPUS when set. Asked together above what
# any path sends: the rate that arrives is the path's most for a multi-flow port.
flows_strobe() {
    local case="$1" round="$2" port="$3"
    shift 3
    local scenario="$RUN_DIR/$case.toml" report="$RUN_DIR/$case-r$round.json"
    local out="$RUN_DIR/$case-r$round.txt" f
    {
        printf '[[ports]]\nname = "tx"\nlocation = "%s"\n\n' "$port"
        for ((f = 0; f < XDPLIVE_FLOWS; f++)); do
            local sport="$((SRC_PORT + f))"
            ((f == 0)) && sport="{ increment = { start = $SRC_PORT, step = 1, count = 1000 } }"
            printf '[[flows]]\nname = "f%d"\ntx = "tx"\nsize = 64\nrate = "%s"\nduration = "continuous"\n' \
                "$f" "$XDPLIVE_FLOW_RATE"
            printf '[[flows.packet]]\nethernet = { dst = "%s" }\n' "$SINK_MAC"
            printf '[[flows.packet]]\nipv4 = { src = "%s", dst = "%s" }\n' "$SRC_IP" "$DST_IP"
            printf '[[flows.packet]]\nudp = { src_port = %s, dst_port = %s }\n\n' "$sport" "$DST_PORT"
        done
    } >"$scenario"
    taskset -c "${RATE_CPUS:-$STROBE_CPU}" "$STROBE" gen -q "$scenario" --lab "$LAB_PREFIX" \
        --json "$report" "$@" >"$out" 2>&1 &
    local pid=$!
    track "$pid"
    measure_and_stop "$case" "$round" "$pid" "$out"
    python3 "$LIVE" annotate-strobe "$RAW" "$report"
}

# xdp-live's engine thread fills the ring and its runner thread keeps the kernel sending:
# two threads, given both CPUs (the others each get STROBE_CPU, one core, as before).
# Each round also sends IMIX with XDPLIVE_IMIX_VARY on strobe's own paths.
XDPLIVE_IMIX_VARY="${XDPLIVE_IMIX_VARY:---vary udp.src_port=rand:1000-2000}"
# IMIX's mean frame without FCS: (7 x 60 + 4 x 566 + 1514) / 12.
IMIX_FRAME_BYTES=349.833
# And several paced flows on one port (flows_strobe).
XDPLIVE_FLOWS="${XDPLIVE_FLOWS:-4}"
XDPLIVE_FLOW_RATE="${XDPLIVE_FLOW_RATE:-1mpps}"
section_xdplive() {
    require_root xdplive
    ensure_testpmd
    ensure_tool trafgen netsniff-ng
    ensure_tool ethtool ethtool
    need_tool taskset
    need_tool stdbuf
    build_strobe
    (cd "$ROOT" && cargo build --release -p strobe-io --example xdp_ceiling >&2) ||
        die "cargo build --release -p strobe-io --example xdp_ceiling failed"
    XDP_CEILING="$ROOT/target/release/examples/xdp_ceiling"
    new_run_dir xdplive
    lab_up
    rx_steering "$THROUGHPUT_RPS"
    write_trafgen_config "$RUN_DIR/frame-sink.trafgen" "$SINK_MAC"
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        # lab:tx@xdp-live turns GRO on at rx0 (a veth takes XDP frames only then); GRO
        # would let the GSO case's superframes reach rx0 whole, so it goes off again.
        # Frames generated in the kernel's program: one core, as the socket paths.
        rate_strobe strobe-xdp-live "$r" lab:tx@xdp-live
        ceiling_probe "$r"
        # The engine writes every frame and the kernel copies it: engine and runner threads.
        RATE_CPUS="$PEER_CPUS" rate_strobe strobe-xdp-live-engine "$r" lab:tx@xdp-live --engine-frames
        ip netns exec "$RX_NS" ethtool -K rx0 gro off >/dev/null || die "cannot turn rx0's GRO off"
        rate_strobe strobe-afxdp "$r" lab:tx@afxdp
        rate_strobe strobe-afpacket "$r" lab:tx
        rate_strobe_gso "$r"
        rate_testpmd testpmd-afxdp "$r" net_af_xdp0,iface=tx0
        rate_trafgen "$r"
        # IMIX with a random source port: strobe's paths only (the peers here send one
        # size). In the kernel, the program cuts each frame from the longest and computes
        # the engine's random values.
        ip netns exec "$RX_NS" ethtool -K rx0 gro on >/dev/null || die "cannot turn rx0's GRO on"
        imix_strobe strobe-xdp-live-imix "$r" lab:tx@xdp-live
        RATE_CPUS="$PEER_CPUS" imix_strobe strobe-xdp-live-engine-imix "$r" lab:tx@xdp-live \
            --engine-frames
        ip netns exec "$RX_NS" ethtool -K rx0 gro off >/dev/null || die "cannot turn rx0's GRO off"
        imix_strobe strobe-afxdp-imix "$r" lab:tx@afxdp
        imix_strobe strobe-afpacket-imix "$r" lab:tx
        # Several paced flows on one port: one kernel program picks each frame's flow by
        # its deadline; elsewhere the engine interleaves them.
        ip netns exec "$RX_NS" ethtool -K rx0 gro on >/dev/null || die "cannot turn rx0's GRO on"
        flows_strobe strobe-xdp-live-flows "$r" lab:tx@xdp-live
        RATE_CPUS="$PEER_CPUS" flows_strobe strobe-xdp-live-engine-flows "$r" lab:tx@xdp-live \
            --engine-frames
        ip netns exec "$RX_NS" ethtool -K rx0 gro off >/dev/null || die "cannot turn rx0's GRO off"
        flows_strobe strobe-afxdp-flows "$r" lab:tx@afxdp
        flows_strobe strobe-afpacket-flows "$r" lab:tx
    done
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary-flows.json" \
        --title "$XDPLIVE_FLOWS paced 64-byte flows on one port, each asked $XDPLIVE_FLOW_RATE, into rx0's stack: Mpps counted at rx0" \
        --reference strobe-xdp-live-flows --peer strobe-xdp-live-engine-flows=1.0 \
        --peer strobe-afxdp-flows=1.0 --peer strobe-afpacket-flows=1.0 \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC" \
            xdp_live_cpus "$PEER_CPUS" flows "$XDPLIVE_FLOWS" flow_rate "$XDPLIVE_FLOW_RATE")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary-flows.json" >"$RUN_DIR/summary-flows.md"
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary-imix.json" \
        --title "IMIX (7 x 64, 4 x 570, 1 x 1518 B) with a random UDP source port into rx0's stack: Mpps counted at rx0" \
        --reference strobe-xdp-live-imix --peer strobe-xdp-live-engine-imix=1.0 \
        --peer strobe-afxdp-imix=1.0 --peer strobe-afpacket-imix=1.0 \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC" \
            xdp_live_cpus "$PEER_CPUS" vary "$XDPLIVE_IMIX_VARY")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary-imix.json" >"$RUN_DIR/summary-imix.md"
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary.json" \
        --title "xdp-live beside the socket paths, 64-byte UDP into rx0's stack: Mpps counted at rx0" \
        --reference strobe-xdp-live --peer xdp-ceiling=0.95 --peer strobe-xdp-live-engine=1.0 \
        --peer strobe-afxdp=2.0 --peer strobe-afpacket=2.0 \
        --peer strobe-afpacket-gso=1.0 --peer testpmd-afxdp=2.0 --peer trafgen=2.0 \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC" \
            xdp_live_cpus "$PEER_CPUS")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md, $RUN_DIR/summary-imix.md, $RUN_DIR/summary-flows.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct xdplive "$@"
