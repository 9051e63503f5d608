#!/usr/bin/env bash
# bench/sections/afxdp.sh — bench/run afxdp:
#   transmit rate on a veth pair, AF_XDP: vs dpdk-testpmd (net_af_xdp)
#
# bench/run afxdp runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"
# shellcheck source=../lib/rate.sh
source "$BENCH_DIR/lib/rate.sh"

section_afxdp() {
    require_root afxdp
    ensure_testpmd
    need_tool taskset
    need_tool stdbuf
    build_strobe
    new_run_dir afxdp
    lab_up
    rx_steering "$THROUGHPUT_RPS"
    local r
    [[ -z "$AFXDP_BEFORE" || -x "$AFXDP_BEFORE" ]] ||
        die "AFXDP_BEFORE ($AFXDP_BEFORE) is not an executable strobe"
    for ((r = 1; r <= ROUNDS; r++)); do
        rate_strobe strobe-afxdp "$r" lab:tx@afxdp
        rate_testpmd testpmd-afxdp "$r" net_af_xdp0,iface=tx0
        if [[ -n "$AFXDP_BEFORE" ]]; then
            STROBE="$AFXDP_BEFORE" rate_strobe strobe-afxdp-before "$r" lab:tx@afxdp
        fi
    done
    python3 "$LIVE" summarize-rate "$RAW" "$RUN_DIR/summary.json" \
        --title "AF_XDP on a veth pair, 64-byte UDP, one core: Mpps counted at rx0" \
        --reference strobe-afxdp --peer testpmd-afxdp=1.0 \
        ${AFXDP_BEFORE:+--peer strobe-afxdp-before=1.0} \
        --meta "$(live_meta rounds "$ROUNDS" duration_s "$DURATION" sink_mac "$SINK_MAC")"
    python3 "$LIVE" markdown-rate "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    log "Markdown tables for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct afxdp "$@"
