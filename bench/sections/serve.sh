#!/usr/bin/env bash
# bench/sections/serve.sh — bench/run serve:
#   strobe driven through `strobe serve` by snappi beside the same
#   64-byte line-rate run from the command line; metrics reply times
#   while it runs; set_config and start to the first frame
#
# bench/run serve runs it, or run it on its own with the same knobs (bench/run --help).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/lab.sh
source "$BENCH_DIR/lib/lab.sh"

# section_serve — strobe through its OTG server (unmodified snappi, the OTG tests'
# virtualenv) beside the command line, round by round, alternating which goes first.

section_serve() {
    require_root serve
    build_strobe
    new_run_dir serve
    lab_up
    bash "$ROOT/scripts/otg-tests.sh" --setup-only >&2
    local py="$ROOT/target/otg-venv/bin/python" port url r
    port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    url="http://127.0.0.1:$port"
    "$STROBE" serve --listen "127.0.0.1:$port" --lab "$LAB_PREFIX" >"$RUN_DIR/serve.log" 2>&1 &
    local server=$!
    track "$server"
    wait_for_line "$RUN_DIR/serve.log" 'Open Traffic Generator API' "$server" "strobe serve"
    for ((r = 1; r <= ROUNDS; r++)); do
        "$py" "$BENCH_DIR/servelib.py" round --strobe "$STROBE" --lab "$LAB_PREFIX" --url "$url" \
            --round "$r" --frames "$SERVE_FRAMES" --out "$RAW"
    done
    for ((r = 1; r <= SERVE_STARTUPS; r++)); do
        "$py" "$BENCH_DIR/servelib.py" startup --strobe "$STROBE" --lab "$LAB_PREFIX" --url "$url" \
            --round "$r" --out "$RAW"
    done
    finish "$server" 10 || true
    "$py" "$BENCH_DIR/servelib.py" summarize "$RAW" "$RUN_DIR/summary.json"
    "$py" "$BENCH_DIR/servelib.py" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "Markdown table for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct serve "$@"
