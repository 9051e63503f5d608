#!/usr/bin/env bash
# bench/sections/controller.sh — bench/run controller:
#   `strobe serve --agent …` (a controller over strobe agents) on one host: 8 agents on
#   loopback, one port each on a bridge in a namespace of their own, 512 flows each crossing
#   agents (set_config, start and metrics reply times beside one agent holding the same
#   flows and ports alone; every flow's counts checked exact); the data path of one flow
#   driven directly vs through the controller; the synchronized start's skew with 2 and 8
#   senders, at each start lead
#
# bench/run controller runs it, or run it on its own with the same knobs (bench/run --help).
#
# Knobs (environment), this section's own:
#   CONTROLLER_AGENTS (agents, one port each, default 8), CONTROLLER_FLOWS (flows per agent,
#   default 64), CONTROLLER_PPS (each flow's rate, default 100), CONTROLLER_PACKETS (each
#   flow's frames, default 300), CONTROLLER_POLLS (flow metrics requests timed after the run,
#   default 50; while it runs they are asked back to back), CONTROLLER_DP_PPS (the data
#   path flow's rate, default 500000), CONTROLLER_DP_SECONDS (its length, default 3),
#   CONTROLLER_ROUNDS (alternating data path rounds, default ROUNDS), CONTROLLER_STARTS
#   (starts per skew case, default 10), CONTROLLER_LEADS (the controllers' --start-lead,
#   one controller each, default "100ms 20ms"; the first runs the scale and data path
#   parts too).
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"

CONTROLLER_AGENTS="${CONTROLLER_AGENTS:-8}"
CONTROLLER_FLOWS="${CONTROLLER_FLOWS:-64}"
CONTROLLER_PPS="${CONTROLLER_PPS:-100}"
CONTROLLER_PACKETS="${CONTROLLER_PACKETS:-300}"
CONTROLLER_POLLS="${CONTROLLER_POLLS:-50}"
CONTROLLER_DP_PPS="${CONTROLLER_DP_PPS:-500000}"
CONTROLLER_DP_SECONDS="${CONTROLLER_DP_SECONDS:-3}"
CONTROLLER_ROUNDS="${CONTROLLER_ROUNDS:-$ROUNDS}"
CONTROLLER_STARTS="${CONTROLLER_STARTS:-10}"
CONTROLLER_LEADS="${CONTROLLER_LEADS:-100ms 20ms}"

# The section's namespace and its links (named with this shell's PID), once created.
CTL_NS=""
CTL_TAG="c$$"
CTL_NS_CREATED=0

# ctl_teardown — remove the section's namespace (its bridge and veth pairs go with it).
ctl_teardown() {
    ((CTL_NS_CREATED)) || return 0
    ip netns del "$CTL_NS" 2>/dev/null || log "could not remove namespace $CTL_NS: run ip netns del $CTL_NS"
    CTL_NS_CREATED=0
}

# ctl_topology N — a namespace with a bridge and N veth pairs: port i is ${CTL_TAG}p$i (MAC
# 02:c7:00:00:00:i), its peer ${CTL_TAG}b$i on the bridge with a static forwarding entry for
# it, so no frame floods; and a direct pair ${CTL_TAG}d0–${CTL_TAG}d1 for the data path.
# IPv6 off, so only the test's frames cross.
ctl_topology() {
    local n="$1" i mac
    CTL_NS="ctlb$$"
    if ip netns list | grep -qE "^$CTL_NS( |$)"; then
        die "namespace $CTL_NS already exists"
    fi
    CTL_NS_CREATED=1
    ip netns add "$CTL_NS"
    ip netns exec "$CTL_NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$CTL_NS" link set lo up
    ip -n "$CTL_NS" link add "${CTL_TAG}br" type bridge stp_state 0 forward_delay 0 mcast_snooping 0
    ip -n "$CTL_NS" link set "${CTL_TAG}br" up
    for ((i = 0; i < n; i++)); do
        mac="$(printf '02:c7:00:00:00:%02x' "$i")"
        ip -n "$CTL_NS" link add "${CTL_TAG}p$i" address "$mac" type veth peer name "${CTL_TAG}b$i"
        ip -n "$CTL_NS" link set "${CTL_TAG}b$i" master "${CTL_TAG}br"
        # Learning off: the static entries are the whole table, so nothing floods and nothing
        # the ports send changes where frames go.
        ip -n "$CTL_NS" link set "${CTL_TAG}b$i" type bridge_slave learning off
        ip -n "$CTL_NS" link set "${CTL_TAG}b$i" up
        ip -n "$CTL_NS" link set "${CTL_TAG}p$i" up
        bridge -n "$CTL_NS" fdb add "$mac" dev "${CTL_TAG}b$i" master static
    done
    ip -n "$CTL_NS" link add "${CTL_TAG}d0" address 02:c7:00:00:01:00 type veth peer name "${CTL_TAG}d1" address 02:c7:00:00:01:01
    ip -n "$CTL_NS" link set "${CTL_TAG}d0" up
    ip -n "$CTL_NS" link set "${CTL_TAG}d1" up
}

# ctl_serve NAME LOGFILE ARG... — `strobe serve` on a free loopback port with its own run
# history and state; sets CTL_URL and CTL_PID.
ctl_serve() {
    local name="$1" logf="$2" port
    shift 2
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$RUN_DIR/state/$name"
    STROBE_STATE_DIR="$RUN_DIR/state/$name" "$STROBE" serve --listen "127.0.0.1:$port" \
        --db "$RUN_DIR/state/$name/runs.db" "$@" >"$logf" 2>&1 &
    CTL_PID=$!
    track "$CTL_PID"
    CTL_URL="http://127.0.0.1:$port"
    wait_for_line "$logf" 'Open Traffic Generator API' "$CTL_PID" "strobe serve ($name)"
}

section_controller() {
    require_root controller
    local k
    for k in CONTROLLER_AGENTS CONTROLLER_FLOWS CONTROLLER_PPS CONTROLLER_PACKETS CONTROLLER_POLLS \
        CONTROLLER_DP_PPS CONTROLLER_DP_SECONDS CONTROLLER_ROUNDS CONTROLLER_STARTS; do
        require_positive_int "$k" "${!k}"
    done
    ((CONTROLLER_AGENTS >= 2 && CONTROLLER_AGENTS <= 250)) || die "CONTROLLER_AGENTS must be 2 to 250"
    need_tool ip
    need_tool bridge
    build_strobe
    new_run_dir controller
    local lib="$BENCH_DIR/controller/controllerlib.py"
    # The common cleanup stops the servers first, then the namespace goes.
    trap 'cleanup; ctl_teardown' EXIT
    ctl_topology "$CONTROLLER_AGENTS"
    log "topology: namespace $CTL_NS, bridge ${CTL_TAG}br, ports ${CTL_TAG}p0..$((CONTROLLER_AGENTS - 1)), cable ${CTL_TAG}d0-${CTL_TAG}d1"

    local i agent_urls=() agent_pids=() agent_flags=()
    for ((i = 0; i < CONTROLLER_AGENTS; i++)); do
        ctl_serve "a$i" "$RUN_DIR/agent-a$i.log" --drain 300ms
        agent_urls+=("$CTL_URL")
        agent_pids+=("$CTL_PID")
        agent_flags+=(--agent "a$i=$CTL_URL")
    done
    machine_meta "$ROOT" strobe_built_from "$STROBE_BUILT_FROM" agents "$CONTROLLER_AGENTS" \
        flows_per_agent "$CONTROLLER_FLOWS" pps "$CONTROLLER_PPS" packets "$CONTROLLER_PACKETS" \
        polls "$CONTROLLER_POLLS" dp_pps "$CONTROLLER_DP_PPS" dp_seconds "$CONTROLLER_DP_SECONDS" \
        rounds "$CONTROLLER_ROUNDS" starts "$CONTROLLER_STARTS" leads "$CONTROLLER_LEADS" \
        namespace "$CTL_NS" >"$RUN_DIR/meta.json"
    local common=(--ns "$CTL_NS" --tag "$CTL_TAG" --agents "${agent_urls[*]}" --out "$RAW")
    local lead first=1 r senders
    for lead in $CONTROLLER_LEADS; do
        ctl_serve "controller-$lead" "$RUN_DIR/controller-$lead.log" --start-lead "$lead" "${agent_flags[@]}"
        local controller_pid="$CTL_PID" controller_url="$CTL_URL"
        if ((first)); then
            python3 "$lib" agents --controller "$controller_url" --out "$RUN_DIR/agents.json"
            log "scale: $CONTROLLER_AGENTS agents x $CONTROLLER_FLOWS flows at $CONTROLLER_PPS pps, $CONTROLLER_PACKETS frames each"
            python3 "$lib" scale --controller "$controller_url" "${common[@]}" \
                --flows "$CONTROLLER_FLOWS" --pps "$CONTROLLER_PPS" --packets "$CONTROLLER_PACKETS" \
                --polls "$CONTROLLER_POLLS"
            log "data path: $CONTROLLER_DP_PPS pps for $CONTROLLER_DP_SECONDS s, $CONTROLLER_ROUNDS rounds"
            for ((r = 1; r <= CONTROLLER_ROUNDS; r++)); do
                python3 "$lib" datapath --controller "$controller_url" "${common[@]}" \
                    --pps "$CONTROLLER_DP_PPS" --seconds "$CONTROLLER_DP_SECONDS" --round "$r"
            done
        fi
        for senders in 2 "$CONTROLLER_AGENTS"; do
            log "start skew: $senders senders, --start-lead $lead, $CONTROLLER_STARTS starts"
            python3 "$lib" skew --controller "$controller_url" "${common[@]}" \
                --senders "$senders" --starts "$CONTROLLER_STARTS" --lead "$lead"
        done
        finish_strobe "$controller_pid" || log "the controller ($lead) exited with an error (log: $RUN_DIR/controller-$lead.log)"
        first=0
    done
    for i in "${agent_pids[@]}"; do
        finish_strobe "$i" || log "agent PID $i exited with an error (logs: $RUN_DIR/agent-*.log)"
    done
    ctl_teardown
    trap cleanup EXIT
    python3 "$lib" summarize "$RAW" "$RUN_DIR/meta.json" "$RUN_DIR/summary.json"
    python3 "$lib" markdown "$RUN_DIR/summary.json" >"$RUN_DIR/summary.md"
    cat "$RUN_DIR/summary.md" >&2
    log "raw: $RAW"
    log "summary: $RUN_DIR/summary.json"
    log "Markdown for BENCHMARKS.md: $RUN_DIR/summary.md"
}

[[ "${BASH_SOURCE[0]}" != "$0" ]] || bench_direct controller "$@"
