#!/usr/bin/env bash
# bench/sections/rfc2544.sh — bench/run rfc2544:
#   RFC 2544 throughput searches through tbf shapers (and a Linux router):
#   strobe's aimed search vs a plain binary search to the same
#   resolution, and vs TRex's published defaults (1 % error, at most 10
#   iterations): trials, wall time, and the NDR against the shaper's rate
#
# bench/run rfc2544 runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

section_rfc2544() {
    require_root rfc2544
    build_strobe
    new_run_dir rfc2544
    local r dut method bps base extra
    for ((r = 1; r <= RFC2544_ROUNDS; r++)); do
        for dut in $RFC2544_DUTS; do
            trains_lab "$dut"
            bps=null
            [[ "$dut" == tbf:* ]] && bps=$(python3 -c 'import re,sys; m=re.fullmatch(r"tbf:([0-9.]+)(k|m|g)bit", sys.argv[1]); print(int(float(m[1])*{"k":1e3,"m":1e6,"g":1e9}[m[2]]))' "$dut")
            # The same searches one after the other on the same lab, the order turning round
            # by round.
            local methods=(aimed binary trex)
            ((r % 2 == 0)) && methods=(trex binary aimed)
            for method in "${methods[@]}"; do
                case "$method" in
                aimed) extra=(--search aimed --resolution 0.5) ;;
                binary) extra=(--search binary --resolution 0.5) ;;
                trex) extra=(--search binary --resolution 1 --max-trials 10) ;;
                esac
                base="$RUN_DIR/${dut//[:]/-}-$method-r$r"
                log "round $r: $dut, $method search"
                in_background "$STROBE" rfc2544 throughput --lab "$TRAINS_LAB_PREFIX" --sizes "$RFC2544_SIZES" \
                    --trial "$RFC2544_TRIAL" --wait 500ms --settle 200ms --pdr 0 "${extra[@]}" --quiet \
                    --json "$base.json" >"$base.log" 2>&1 ||
                    die "strobe rfc2544 throughput failed (log: $base.log)"
                printf '{"round":%d,"dut":"%s","method":"%s","shaper_bps":%s,"report":"%s"}\n' \
                    "$r" "$dut" "$method" "$bps" "$base.json" >>"$RAW"
            done
        done
    done
    python3 "$BENCH_DIR/rfc2544lib.py" summarize "$RAW" "$RUN_DIR/summary.json" \
        "$(machine_meta "$ROOT" strobe_built_from "$STROBE_BUILT_FROM")"
    python3 "$BENCH_DIR/rfc2544lib.py" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct rfc2544 "$@"
