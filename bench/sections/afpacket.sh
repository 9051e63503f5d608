#!/usr/bin/env bash
# bench/sections/afpacket.sh — bench/run afpacket:
#   transmit rate on a veth pair, AF_PACKET: vs dpdk-testpmd
#   (net_af_packet) and trafgen
#
# bench/run afpacket runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"
# shellcheck source=../lib/rate.sh
source "$BENCH_DIR/lib/rate.sh"

section_afpacket() {
    require_root afpacket
    ensure_testpmd
    ensure_tool trafgen netsniff-ng
    ensure_tool ethtool ethtool
    need_tool taskset
    need_tool stdbuf
    build_strobe
    new_run_dir afpacket
    lab_up
    rx_steering "$THROUGHPUT_RPS"
    write_trafgen_config "$RUN_DIR/frame-sink.trafgen" "$SINK_MAC"
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        rate_strobe strobe-afpacket "$r" lab:tx
        rate_testpmd testpmd-afpacket "$r" net_af_packet0,iface=tx0,qdisc_bypass=1
        rate_trafgen "$r"
        rate_strobe_gso "$r"
    done
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary.json" \
        --title "AF_PACKET on a veth pair, 64-byte UDP, one core: Mpps counted at rx0" \
        --reference strobe-afpacket --peer testpmd-afpacket=1.0 --peer trafgen=1.5 \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC" \
            trafgen "$(trafgen --version | head -n 1)")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary-gso.json" \
        --title "AF_PACKET with UDP segmentation batches (afpacket-gso) against the same peers" \
        --reference strobe-afpacket-gso --peer testpmd-afpacket=1.0 --peer trafgen=1.5 \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary-gso.json" >"$RUN_DIR/summary-gso.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md, $RUN_DIR/summary-gso.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct afpacket "$@"
