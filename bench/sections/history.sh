#!/usr/bin/env bash
# bench/sections/history.sh — bench/run history:
#   the run history at scale: `strobe runs list/show/compare` timed on a
#   database of HISTORY_RUNS (10 000) runs
#
# bench/run history runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# section_history — the run history at scale: one lab run recorded, the database filled to
# HISTORY_RUNS copies of it, `strobe runs` commands timed (HISTORY_ROUNDS each).
section_history() {
    require_root history
    build_strobe
    new_run_dir history
    lab_up
    local db="$RUN_DIR/runs.db"
    "$STROBE" gen --lab "$LAB_PREFIX" --port lab:tx --rx lab:rx --udp 198.18.0.1:1000-198.18.1.1:2000 \
        --rate 50kpps --count 100000 --quiet --db "$db" >"$RUN_DIR/gen.log" 2>&1 ||
        die "strobe gen failed (log: $RUN_DIR/gen.log)"
    log "filling the history to $HISTORY_RUNS runs and timing strobe runs ($HISTORY_ROUNDS rounds)"
    python3 "$BENCH_DIR/historylib.py" measure --strobe "$STROBE" --db "$db" --runs "$HISTORY_RUNS" \
        --rounds "$HISTORY_ROUNDS" --out "$RUN_DIR/summary.json" --meta "$(machine_meta "$ROOT")"
    python3 "$BENCH_DIR/historylib.py" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct history "$@"
