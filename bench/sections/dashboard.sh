#!/usr/bin/env bash
# bench/sections/dashboard.sh — bench/run dashboard:
#   a line-rate run through strobe serve with the web dashboard open in
#   headless chromium beside the same run with nobody watching
#
# bench/run dashboard runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# section_dashboard — the web dashboard's cost to the data path: alternating line-rate runs
# through strobe serve with and without the dashboard open in headless chromium.
section_dashboard() {
    require_root dashboard
    build_strobe
    new_run_dir dashboard
    lab_up
    bash "$ROOT/scripts/otg-tests.sh" --setup-only >&2
    local py="$ROOT/target/otg-venv/bin/python" port url r
    port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    url="http://127.0.0.1:$port"
    "$STROBE" serve --listen "127.0.0.1:$port" --lab "$LAB_PREFIX" --db "$RUN_DIR/runs.db" >"$RUN_DIR/serve.log" 2>&1 &
    local server=$!
    track "$server"
    wait_for_line "$RUN_DIR/serve.log" 'Open Traffic Generator API' "$server" "strobe serve"
    for ((r = 1; r <= ROUNDS; r++)); do
        "$py" "$BENCH_DIR/dashboardlib.py" round --url "$url" --pid "$server" --round "$r" --seconds "$DASHBOARD_SECONDS" --out "$RAW"
    done
    "$py" "$BENCH_DIR/dashboardlib.py" poll-cost --url "$url" --pid "$server" --seconds "$DASHBOARD_SECONDS" --out "$RUN_DIR/polls.json"
    finish "$server" 10 || true
    "$py" "$BENCH_DIR/dashboardlib.py" summarize "$RAW" "$RUN_DIR/summary.json" "$(machine_meta "$ROOT")" "$RUN_DIR/polls.json"
    "$py" "$BENCH_DIR/dashboardlib.py" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct dashboard "$@"
