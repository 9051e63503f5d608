# shellcheck shell=bash
# shellcheck disable=SC2034 # the paths and knobs are read by the sections' scripts
# bench/lib/common.sh — what every bench section shares: paths, the knobs and their
# defaults, the background processes a run starts and their cleanup on exit, tools, the
# strobe build, the host's description, the run directory and the entry point
# (bench_main). Sourced by bench/run and by each bench/sections/*.sh, once per shell.
[[ -z "${BENCH_COMMON_LOADED:-}" ]] || return 0
BENCH_COMMON_LOADED=1
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
# cargo builds into CARGO_TARGET_DIR when it is set (relative to ROOT, where it is run).
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
[[ "$TARGET_DIR" == /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
STROBE="$TARGET_DIR/release/strobe"
LIB="$BENCH_DIR/benchlib.py"
LIVE="$BENCH_DIR/livelib.py"
OUT_ROOT="$BENCH_DIR/out"
LAT="$BENCH_DIR/latlib.py"

# Knobs (environment; the header of bench/run describes them). Those of one section only
# that bench_main does not check are in that section's script.
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
FIELD_DURATION="${FIELD_DURATION:-3}"
FIELD_ROUNDS="${FIELD_ROUNDS:-3}"
BATCH_DURATION="${BATCH_DURATION:-2}"
# testpmd's main lcore only prints stats; its one forwarding lcore is the second core
# listed. strobe is pinned to that same core so both measure the same CPU.
STROBE_CPU="${STROBE_CPU:-1}"
PEER_CPUS="${PEER_CPUS:-0,1}"
SINK_CPU="${SINK_CPU:-0}"
LAB_PREFIX="${LAB_PREFIX:-bench}"
# Frames to a MAC nobody owns are counted by rx0 and dropped right after; see
# BENCHMARKS.md for why the throughput sections do not address rx0 itself.
SINK_MAC="${SINK_MAC:-02:00:00:00:00:00}"
# Receive packet steering on rx0 in the throughput sections: off (the work stays on the
# sending core, as veth does natively) or lab (the lab's setting: other cores).
THROUGHPUT_RPS="${THROUGHPUT_RPS:-off}"
# Receive steering in the precision section: off by default, as on a plain veth pair; with
# lab, every frame's send also raises an inter-processor interrupt (see BENCHMARKS.md).
PRECISION_RPS="${PRECISION_RPS:-off}"
PRECISION_ROUNDS="${PRECISION_ROUNDS:-5}"
PRECISION_DURATION="${PRECISION_DURATION:-5}"
PRECISION_FAST_DURATION="${PRECISION_FAST_DURATION:-2}"
KEEP_CAPTURES="${KEEP_CAPTURES:-0}"
RTT_SECONDS="${RTT_SECONDS:-6}"
RTT_RATE="${RTT_RATE:-5000}"
RTT_SERVER_CPU="${RTT_SERVER_CPU:-0}"
RTT_CLIENT_CPU="${RTT_CLIENT_CPU:-1}"
SOCKPERF_PORT="${SOCKPERF_PORT:-11111}"
LATCOST_DURATION="${LATCOST_DURATION:-5}"
TRUTH_COUNT="${TRUTH_COUNT:-200000}"
TRUTH_RATE="${TRUTH_RATE:-100000}"
TRUTH_LAB_PREFIX="${TRUTH_LAB_PREFIX:-${LAB_PREFIX}br}"
WIRE_ROUNDS="${WIRE_ROUNDS:-1}"
WIRE_GAPS="${WIRE_GAPS:-300000}"
WIRE_POISSON_RATES="${WIRE_POISSON_RATES-10000,100000,500000}"
WIRE_DITG_RATES="${WIRE_DITG_RATES-10000,100000,500000}"
WIRE_CBR_RATES="${WIRE_CBR_RATES-500000,1000000}"
# (An empty list, e.g. WIRE_POISSON_RATES=, skips that kind.)
WIRE_CBR_SECONDS="${WIRE_CBR_SECONDS:-2}"
WIRE_UNPACED_SECONDS="${WIRE_UNPACED_SECONDS:-3}"
WIRE_BURST_PATTERN="${WIRE_BURST_PATTERN:-burst:32/100us}"
WIRE_BURST_RATE="${WIRE_BURST_RATE:-10mpps}"
WIRE_BURST_TRAINS="${WIRE_BURST_TRAINS:-5000}"
WIRE_BURST_GAP_NS="${WIRE_BURST_GAP_NS:-5000}"
WIRE_FLOOR="${WIRE_FLOOR:-auto}"
WIRE_TOLERANCE="${WIRE_TOLERANCE:-500ns}"
WIRE_BACKENDS="${WIRE_BACKENDS:-afpacket,afxdp}"
# CBR at this fraction of the unpaced rate the same round measured on the same path (0 = off):
# the rate near the ceiling and the run's wall time against the time asked.
WIRE_CEILING_FRACTION="${WIRE_CEILING_FRACTION:-0.8}"
# The late policy of the ceiling case (empty: strobe's default, smooth; e.g. catch-up).
WIRE_CEILING_LATE="${WIRE_CEILING_LATE:-}"

SERVE_FRAMES="${SERVE_FRAMES:-3000000}"
SERVE_STARTUPS="${SERVE_STARTUPS:-5}"
TRAINS_ROUNDS="${TRAINS_ROUNDS:-3}"
RFC2544_ROUNDS="${RFC2544_ROUNDS:-3}"
HISTORY_RUNS="${HISTORY_RUNS:-10000}"
DASHBOARD_SECONDS="${DASHBOARD_SECONDS:-8}"
HISTORY_ROUNDS="${HISTORY_ROUNDS:-7}"
STUDY_ROUNDS="${STUDY_ROUNDS:-3}"
STUDY_DUTS="${STUDY_DUTS:-router,xdp,testpmd,ovs}"
STUDY_RATES="${STUDY_RATES:-20kpps,50kpps}"
STUDY_FRAMES="${STUDY_FRAMES:-200000}"
RFC2544_DUTS="${RFC2544_DUTS:-tbf:50mbit router}"
RFC2544_SIZES="${RFC2544_SIZES:-256,512,1518}"
RFC2544_TRIAL="${RFC2544_TRIAL:-2s}"
TRAINS_CASES="${TRAINS_CASES:-10mbit:500:24 50mbit:1000:60 200mbit:1000:60}"
TRAINS_COUNT="${TRAINS_COUNT:-100}"
TRAINS_IPERF_SECONDS="${TRAINS_IPERF_SECONDS:-5}"
TRAINS_LAB_PREFIX="${TRAINS_LAB_PREFIX:-${LAB_PREFIX}tb}"

FLOWS_COUNTS="${FLOWS_COUNTS:-1 64 4096 65536}"
FLOWS_FRAMES="${FLOWS_FRAMES:-1000000}"
FLOWS_ROUNDS="${FLOWS_ROUNDS:-2}"
FLOWS_BEFORE="${FLOWS_BEFORE:-}"
FLOWS_TAGS="${FLOWS_TAGS:-0}"
AFXDP_BEFORE="${AFXDP_BEFORE:-}"
RXCOUNT_ROUNDS="${RXCOUNT_ROUNDS:-3}"
RXCOUNT_FRAMES="${RXCOUNT_FRAMES:-20000000}"
RXCOUNT_REPEAT="${RXCOUNT_REPEAT:-10000000}"

# Every section, in the order `bench/run` runs them; bench/sections/NAME.sh defines
# section_NAME.
SECTIONS=(null afxdp afpacket xdplive rxcount precision wire pacing flows rtt latcost truth serve dashboard trains rfc2544 history controller study)

# Background processes this script started (peers, captures, servers), stopped on exit.
# A PID leaves the list once it is reaped, so a recycled PID is never signalled.
BG_PIDS=()
# Set once this script has created the lab, so only then is it removed.
LAB_CREATED=0
# The same for the truth section's bridge lab.
TRUTH_LAB_CREATED=0
# The same for the trains section's shaper lab (rebuilt per rate).
TRAINS_LAB_CREATED=0
# rx0's receive steering mask as the lab set it up, read by lab_up.
LAB_RPS_MASK=0
# Commit (and state) the strobe binary was built from, set by build_strobe.
STROBE_BUILT_FROM=""

log() { printf '[bench] %s\n' "$*" >&2; }
die() {
    printf '[bench] error: %s\n' "$*" >&2
    exit 1
}

track() { BG_PIDS+=("$1"); }
untrack() {
    local keep=() p
    for p in "${BG_PIDS[@]}"; do
        [[ "$p" == "$1" ]] || keep+=("$p")
    done
    BG_PIDS=("${keep[@]}")
}

# alive PID — true while PID runs; an exited child that is not yet reaped is a zombie
# and counts as gone.
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat%% *}" != Z ]]
}

# signal_tree SIGNAL PID — PID's child processes first (trafgen's workers only stop on
# their own signal), then PID itself.
signal_tree() {
    local child
    for child in $(pgrep -P "$2" 2>/dev/null); do
        kill "-$1" "$child" 2>/dev/null || true
    done
    kill "-$1" "$2" 2>/dev/null || true
}

# finish PID [SECONDS] — stop a tracked background process with SIGINT (SIGKILL if it is
# still running after SECONDS, default 10) and return its exit status.
finish() {
    local pid="$1" limit="${2:-10}" tenths=0 rc=0
    signal_tree INT "$pid"
    while alive "$pid"; do
        if ((tenths >= limit * 10)); then
            log "PID $pid still runs ${limit} s after SIGINT; killing it"
            signal_tree KILL "$pid"
            break
        fi
        sleep 0.1
        tenths=$((tenths + 1))
    done
    wait "$pid" || rc=$?
    untrack "$pid"
    return "$rc"
}

# finish_strobe PID — finish for strobe, which exits 130 once a SIGINT has stopped it and its
# results are written (docs/results.md: exit codes); any other status is a failure.
finish_strobe() {
    local rc=0
    finish "$@" || rc=$?
    ((rc == 0 || rc == 130)) || return "$rc"
}

# in_background COMMAND... — run COMMAND as a tracked child and wait for it. bash runs a
# signal trap only once the foreground command has ended, so a SIGTERM would otherwise
# wait for a whole run; the wait builtin returns at once, and cleanup stops COMMAND.
in_background() {
    "$@" &
    local pid=$! rc=0
    track "$pid"
    wait "$pid" || rc=$?
    untrack "$pid"
    return "$rc"
}

cleanup() {
    local pid
    for pid in "${BG_PIDS[@]}"; do
        finish "$pid" 3 || true
    done
    # testpmd keeps its runtime files under its own prefix; nothing else lives there.
    rm -rf /var/run/dpdk/strobe-bench 2>/dev/null || true
    rmdir /var/run/dpdk 2>/dev/null || true
    if ((LAB_CREATED)); then
        "$STROBE" lab down --prefix "$LAB_PREFIX" >&2 || log "could not remove lab '$LAB_PREFIX': run strobe lab down --prefix $LAB_PREFIX"
    fi
    if ((TRUTH_LAB_CREATED)); then
        "$STROBE" lab down --prefix "$TRUTH_LAB_PREFIX" >&2 || log "could not remove lab '$TRUTH_LAB_PREFIX': run strobe lab down --prefix $TRUTH_LAB_PREFIX"
    fi
    if ((TRAINS_LAB_CREATED)); then
        "$STROBE" lab down --prefix "$TRAINS_LAB_PREFIX" >&2 || log "could not remove lab '$TRAINS_LAB_PREFIX': run strobe lab down --prefix $TRAINS_LAB_PREFIX"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

require_positive_int() {
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive whole number, got '$2'"
}

# ---------------------------------------------------------------------------------------
# Tools

need_tool() { # need_tool COMMAND
    command -v "$1" >/dev/null 2>&1 || die "$1 is required but not installed"
}

# ensure_tool COMMAND PACKAGE — install the Debian PACKAGE that provides COMMAND if missing.
ensure_tool() {
    local cmd="$1" pkg="$2"
    command -v "$cmd" >/dev/null 2>&1 && return
    log "$cmd missing: installing $pkg"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y "$pkg" >&2; then
        log "install failed; refreshing the package lists and retrying"
        "${sudo[@]}" apt-get update >&2 || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y "$pkg" >&2 ||
            die "cannot install $pkg (provides $cmd)"
    fi
    command -v "$cmd" >/dev/null 2>&1 || die "$pkg installed but $cmd is not on PATH"
}

ensure_testpmd() { ensure_tool dpdk-testpmd dpdk-dev; }

build_strobe() {
    if [[ -n "${STROBE_BIN:-}" ]]; then
        [[ -x "$STROBE_BIN" ]] || die "STROBE_BIN ($STROBE_BIN) is not an executable"
        STROBE="$STROBE_BIN"
        STROBE_BUILT_FROM="given: $STROBE_BIN"
        log "strobe: $STROBE (STROBE_BIN, not built)"
        return
    fi
    log "building strobe (release)"
    # The commit the binary is built from; others may commit while a section runs.
    STROBE_BUILT_FROM="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [[ -z "$(git -C "$ROOT" status --porcelain -- crates 2>/dev/null)" ]] ||
        STROBE_BUILT_FROM+="+uncommitted"
    (cd "$ROOT" && cargo build --release -p strobe-cli >&2) ||
        die "cargo build --release -p strobe-cli failed"
    [[ -x "$STROBE" ]] || die "build succeeded but $STROBE is missing"
}

machine_meta() { # JSON describing the host, stored with every summary
    python3 - "$@" <<'EOF'
import json, os, platform, subprocess, sys, datetime
model = "unknown"
try:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
except OSError:
    pass
def cmd(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
print(json.dumps({
    "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "nproc": os.cpu_count(),
    "cpu_model": model,
    "kernel": platform.release(),
    "testpmd_package": cmd("dpkg-query", "-W", "-f=${Version}", "dpdk-dev"),
    "strobe_git": cmd("git", "-C", sys.argv[1], "rev-parse", "--short", "HEAD"),
    "strobe_tree_dirty": bool(cmd("git", "-C", sys.argv[1], "status", "--porcelain", "--", "crates")),
    "settings": dict(zip(sys.argv[2::2], sys.argv[3::2])),
}))
EOF
}

require_root() {
    [[ $(id -u) -eq 0 ]] ||
        die "section $1 needs root (namespaces, veth, raw sockets): run sudo bench/run $1"
}

# new_run_dir SECTION — sets RUN_DIR and an empty RAW for the section.
new_run_dir() {
    RUN_DIR="$OUT_ROOT/$1-$(date -u +%Y%m%dT%H%M%SZ)"
    RAW="$RUN_DIR/raw.jsonl"
    mkdir -p "$RUN_DIR"
    : >"$RAW"
    log "section $1: results in $RUN_DIR"
}

# wait_for_line FILE PATTERN PID WHAT — until FILE holds PATTERN (PID has finished setting
# up); fails when PID exits first or after 10 s.
wait_for_line() {
    local tenths=0
    until grep -q "$2" "$1" 2>/dev/null; do
        alive "$3" || {
            tail -n 20 "$1" >&2
            die "$4 exited before it was ready (log: $1)"
        }
        ((tenths < 100)) || die "$4 was not ready within 10 s (log: $1)"
        sleep 0.1
        tenths=$((tenths + 1))
    done
}

# wire_list NAME VALUE — the comma-separated VALUE as words, each a positive whole number.
wire_list() {
    local v
    for v in ${2//,/ }; do
        require_positive_int "$1" "$v"
        printf '%s\n' "$v"
    done
}

usage() {
    # The header comment of bench/run, up to its first line of code.
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$BENCH_DIR/run"
}

# bench_main [SECTION...] — check the knobs, then run the SECTIONs (none: all) in order.
bench_main() {
    require_positive_int ROUNDS "$ROUNDS"
    require_positive_int DURATION "$DURATION"
    require_positive_int FIELD_DURATION "$FIELD_DURATION"
    require_positive_int FIELD_ROUNDS "$FIELD_ROUNDS"
    require_positive_int BATCH_DURATION "$BATCH_DURATION"
    require_positive_int PRECISION_ROUNDS "$PRECISION_ROUNDS"
    require_positive_int PRECISION_DURATION "$PRECISION_DURATION"
    require_positive_int PRECISION_FAST_DURATION "$PRECISION_FAST_DURATION"
    require_positive_int RTT_SECONDS "$RTT_SECONDS"
    require_positive_int RTT_RATE "$RTT_RATE"
    require_positive_int SOCKPERF_PORT "$SOCKPERF_PORT"
    require_positive_int LATCOST_DURATION "$LATCOST_DURATION"
    require_positive_int TRUTH_COUNT "$TRUTH_COUNT"
    require_positive_int TRUTH_RATE "$TRUTH_RATE"
    require_positive_int RXCOUNT_ROUNDS "$RXCOUNT_ROUNDS"
    require_positive_int RXCOUNT_FRAMES "$RXCOUNT_FRAMES"
    require_positive_int RXCOUNT_REPEAT "$RXCOUNT_REPEAT"
    require_positive_int TRAINS_ROUNDS "$TRAINS_ROUNDS"
    require_positive_int TRAINS_COUNT "$TRAINS_COUNT"
    require_positive_int TRAINS_IPERF_SECONDS "$TRAINS_IPERF_SECONDS"
    require_positive_int RFC2544_ROUNDS "$RFC2544_ROUNDS"
    require_positive_int HISTORY_RUNS "$HISTORY_RUNS"
    require_positive_int DASHBOARD_SECONDS "$DASHBOARD_SECONDS"
    require_positive_int HISTORY_ROUNDS "$HISTORY_ROUNDS"
    require_positive_int STUDY_ROUNDS "$STUDY_ROUNDS"
    require_positive_int STUDY_FRAMES "$STUDY_FRAMES"
    require_positive_int WIRE_ROUNDS "$WIRE_ROUNDS"
    require_positive_int WIRE_GAPS "$WIRE_GAPS"
    require_positive_int WIRE_CBR_SECONDS "$WIRE_CBR_SECONDS"
    require_positive_int WIRE_UNPACED_SECONDS "$WIRE_UNPACED_SECONDS"
    require_positive_int WIRE_BURST_TRAINS "$WIRE_BURST_TRAINS"
    require_positive_int WIRE_BURST_GAP_NS "$WIRE_BURST_GAP_NS"
    [[ "$WIRE_BURST_PATTERN" =~ ^burst:[1-9][0-9]*/[^/]+$ ]] ||
        die "WIRE_BURST_PATTERN must be burst:PACKETS/INTER_BURST_GAP (e.g. burst:32/10us), got '$WIRE_BURST_PATTERN'"
    [[ "$RTT_SERVER_CPU" =~ ^[0-9]+$ && "$RTT_CLIENT_CPU" =~ ^[0-9]+$ ]] ||
        die "RTT_SERVER_CPU and RTT_CLIENT_CPU must be core numbers, got '$RTT_SERVER_CPU' and '$RTT_CLIENT_CPU'"
    [[ "$KEEP_CAPTURES" =~ ^[01]$ ]] || die "KEEP_CAPTURES must be 0 or 1, got '$KEEP_CAPTURES'"
    [[ "$THROUGHPUT_RPS" == off || "$THROUGHPUT_RPS" == lab ]] ||
        die "THROUGHPUT_RPS must be off or lab, got '$THROUGHPUT_RPS'"
    [[ "$SINK_MAC" =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ ]] ||
        die "SINK_MAC must be a MAC address in lowercase hex (aa:bb:cc:dd:ee:ff), got '$SINK_MAC'"
    need_tool python3
    need_tool cargo

    local wanted=("$@")
    if ((${#wanted[@]} == 0)); then
        wanted=("${SECTIONS[@]}")
    fi
    local s
    for s in "${wanted[@]}"; do
        case "$s" in
        -h | --help) usage; exit 0 ;;
        --list) printf '%s\n' "${SECTIONS[@]}"; exit 0 ;;
        esac
        declare -F "section_$s" >/dev/null ||
            die "unknown section '$s' — accepted: ${SECTIONS[*]} (or none for all)"
    done
    for s in "${wanted[@]}"; do
        "section_$s"
    done
}

# bench_direct SECTION [ARG...] — a section's script run on its own: the same as
# `bench/run SECTION`.
bench_direct() {
    local s="$1"
    shift
    (($# == 0)) || die "bench/sections/$s.sh takes no arguments (the knobs are environment variables: bench/run --help)"
    bench_main "$s"
}
