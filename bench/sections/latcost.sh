#!/usr/bin/env bash
# bench/sections/latcost.sh — bench/run latcost:
#   throughput with and without per-packet latency measurement
#
# bench/run latcost runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# The issue's target: the share of throughput that measuring latency may cost at a measured
# rate of 1 Mpps.

LATCOST_MIN_MPPS=1.0
LATCOST_MAX_COST=0.1

# latcost_run CASE ROUND BACKEND on|off TX_PORT RX_PORT — strobe at full speed from
# TX_PORT to RX_PORT for LATCOST_DURATION, measuring latency (on) or not (off). strobe
# places its workers itself: transmit on the highest core, receive on the lowest. The
# frames go to SINK_MAC, as in the throughput sections: strobe's promiscuous receiver
# still gets every one, and rx0's stack drops them instead of answering each with ICMP,
# which would measure the kernel's UDP path rather than strobe. Both modes use batches of
# 32 (without latency strobe would pick its throughput batch, and the comparison would
# measure the batch size as well).
latcost_run() {
    local case="$1" round="$2" backend="$3" latency="$4" tx="$5" rx="$6"
    local base="$RUN_DIR/$case-r$round" extra=(--batch 32)
    [[ "$latency" == off ]] && extra+=(--no-latency)
    if ! in_background "$STROBE" gen -q --lab "$LAB_PREFIX" --port "$tx" --rx "$rx" \
        --dst-mac "$SINK_MAC" --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size 64 --rate max \
        --duration "${LATCOST_DURATION}s" "${extra[@]}" --json "$base.json" >"$base.txt" 2>&1; then
        cat "$base.txt" >&2
        die "strobe gen ($case, round $round) failed (log: $base.txt)"
    fi
    python3 "$LAT" latcost-row "$base.json" --case "$case" --round "$round" --backend "$backend" \
        --latency "$latency" >>"$RAW"
    log "$(tail -n 1 "$RAW" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%-20s r%d  sent %.3f Mpps, received %.3f Mpps, loss %.3f %%" % (
    r["case"], r["round"], r["tx_mpps"], r["rx_mpps"], r["loss_pct"]))')"
}

section_latcost() {
    require_root latcost
    build_strobe
    new_run_dir latcost
    lab_up
    rx_steering lab
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        latcost_run afpacket-latency "$r" afpacket on lab:tx lab:rx
        latcost_run afpacket-no-latency "$r" afpacket off lab:tx lab:rx
        latcost_run afxdp-latency "$r" afxdp on lab:tx@afxdp lab:rx@afxdp
        latcost_run afxdp-no-latency "$r" afxdp off lab:tx@afxdp lab:rx@afxdp
        # AF_XDP sends cheapest on veth, AF_PACKET's kernel-stamped receive path runs on the
        # other core (receive steering): the fastest pairing that measures latency here.
        latcost_run xdptx-pktrx-latency "$r" afxdp-tx+afpacket-rx on lab:tx@afxdp lab:rx
        latcost_run xdptx-pktrx-no-latency "$r" afxdp-tx+afpacket-rx off lab:tx@afxdp lab:rx
    done
    python3 "$LAT" summarize-latcost "$RAW" "$RUN_DIR/summary.json" --min-mpps "$LATCOST_MIN_MPPS" \
        --max-cost "$LATCOST_MAX_COST" \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$LATCOST_DURATION" frame_size 64 sink_mac "$SINK_MAC")"
    python3 "$LAT" markdown-latcost "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct latcost "$@"
