#!/usr/bin/env bash
# bench/sections/flows.sh — bench/run flows:
#   many flows on one null port (1, 64, 4096 and 65536 flows): the
#   engine's rate as the flows it merges by deadline grow; with
#   FLOWS_BEFORE, an older build too; with FLOWS_TAGS=1, each flow also
#   with a 4-value source port untagged (varying) and tagged (tagged)
#
# bench/run flows runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

section_flows() {
    need_tool taskset
    build_strobe
    [[ -z "$FLOWS_BEFORE" || -x "$FLOWS_BEFORE" ]] ||
        die "FLOWS_BEFORE ($FLOWS_BEFORE) is not an executable strobe"
    new_run_dir flows
    local r n build bin report start wall
    local builds=(after) variant
    [[ -n "$FLOWS_BEFORE" ]] && builds=(before after)
    [[ "$FLOWS_TAGS" == 1 ]] && builds+=(varying tagged)
    for n in $FLOWS_COUNTS; do
        for variant in plain varying tagged; do
            python3 "$BENCH_DIR/flowslib.py" scenario "$n" "$FLOWS_FRAMES" \
                "$RUN_DIR/flows-$n-$variant.toml" --variant "$variant"
        done
    done
    for ((r = 1; r <= FLOWS_ROUNDS; r++)); do
        for n in $FLOWS_COUNTS; do
            for build in "${builds[@]}"; do
                bin="$STROBE"
                [[ "$build" == before ]] && bin="$FLOWS_BEFORE"
                # The tag comparison: the same build, the source port varying, with and
                # without a metric tag on it.
                variant=plain
                [[ "$build" == varying || "$build" == tagged ]] && variant="$build"
                report="$RUN_DIR/$build-$n-r$r.json"
                start=$(date +%s.%N)
                in_background env STROBE_DB="$RUN_DIR/runs.db" taskset -c "$STROBE_CPU" "$bin" gen \
                    "$RUN_DIR/flows-$n-$variant.toml" --unpaced --quiet --json "$report" \
                    >"$RUN_DIR/$build-$n-r$r.log" 2>&1 ||
                    die "strobe ($build) with $n flows failed (log: $RUN_DIR/$build-$n-r$r.log)"
                wall=$(python3 -c 'import sys,time; print(time.time() - float(sys.argv[1]))' "$start")
                python3 "$BENCH_DIR/flowslib.py" row "$report" --build "$build" --flows "$n" \
                    --round "$r" --wall-s "$wall" >>"$RAW"
                log "round $r: $build, $n flows: $(tail -n 1 "$RAW")"
            done
        done
    done
    python3 "$BENCH_DIR/flowslib.py" markdown "$RAW" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct flows "$@"
