#!/usr/bin/env bash
# bench/sections/study.sh — bench/run study:
#   the forwarder study (issue #33): the same constant-rate and Poisson loads through the
#   lab's router, XDP forwarder, testpmd and Open vSwitch, STUDY_ROUNDS times; every
#   percentile as the median of the rounds with their range
#
# bench/run study runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

# section_study — `strobe study forwarders` STUDY_ROUNDS times (each builds and removes its
# own labs under the prefix LAB_PREFIX followed by st), the rounds' tables summarised.
section_study() {
    require_root study
    build_strobe
    new_run_dir study
    local prefix="${LAB_PREFIX}st" round
    local outputs=()
    for ((round = 1; round <= STUDY_ROUNDS; round++)); do
        log "study round $round/$STUDY_ROUNDS: --duts $STUDY_DUTS --rates $STUDY_RATES --frames $STUDY_FRAMES"
        "$STROBE" study forwarders --duts "$STUDY_DUTS" --loads constant,poisson \
            --rates "$STUDY_RATES" --frames "$STUDY_FRAMES" --lab "$prefix" --quiet \
            --html "$RUN_DIR/study-$round.html" --json "$RUN_DIR/study-$round.json" \
            --db "$RUN_DIR/runs.db" >"$RUN_DIR/study-$round.txt" 2>"$RUN_DIR/study-$round.log" ||
            die "strobe study forwarders failed in round $round (log: $RUN_DIR/study-$round.log)"
        outputs+=("$RUN_DIR/study-$round.json")
    done
    python3 "$BENCH_DIR/studylib.py" "${outputs[@]}" \
        --meta "$(machine_meta "$ROOT")" --built-from "$STROBE_BUILT_FROM" \
        --out "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct study "$@"
