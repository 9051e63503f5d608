# Shared by tests/deploy/run.sh and tests/package/run.sh (sourced, bash): the pass/fail/skip
# tally and its summary line, clean-up on every exit, a unit file's capabilities and
# locked-memory limit, and the test host both run strobe on as a unit's user would: a veth
# pair in a network namespace of its own and a fresh system user with nothing.
#
# The caller sets TAG (names: ${TAG}ns, ${TAG}a, ${TAG}b, ${TAG}u) and SUITE (the summary's
# name) before sourcing, appends background PIDs to PIDS, and may define extra_cleanup for
# what only it makes (containers, an installed package).

NS=${TAG}ns A=${TAG}a B=${TAG}b TUSER=${TAG}u
START=$(date +%s)
PASSED=0 FAILED=0 SKIPPED=0
PIDS=() MADE_NS=0 MADE_USER=0 WORK=""

pass() { echo "ok: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAILED: $*"; FAILED=$((FAILED + 1)); }
skip() { echo "skipped: $*"; SKIPPED=$((SKIPPED + 1)); }

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if declare -F extra_cleanup >/dev/null; then extra_cleanup; fi
    [ "$MADE_NS" = 1 ] && ip netns del "$NS" 2>/dev/null
    [ "$MADE_USER" = 1 ] && userdel "$TUSER" 2>/dev/null
    [ -n "$WORK" ] && rm -rf "$WORK"
}
finish() {
    local rc=$?
    cleanup
    echo "$SUITE: $PASSED passed, $FAILED failed, $SKIPPED skipped ($(($(date +%s) - START)) s)"
    [ "$FAILED" -gt 0 ] && exit 1
    exit "$rc"
}
trap finish EXIT
trap 'echo "FAILED: interrupted"; FAILED=$((FAILED + 1)); exit 130' INT TERM

# unit_value FILE KEY: the last KEY= line's value in a unit file.
unit_value() { sed -n "s/^$2=//p" "$1" | tail -1; }

# unit_limits FILE: sets SETPRIV_CAPS (the unit's AmbientCapabilities= as setpriv names:
# CAP_NET_RAW CAP_BPF -> net_raw,bpf) and ML (its LimitMEMLOCK= in bytes, but never above
# this machine's hard limit: raising it takes CAP_SYS_RESOURCE, which a sandbox may not have).
unit_limits() {
    local hard
    SETPRIV_CAPS=$(unit_value "$1" AmbientCapabilities | tr '[:upper:]' '[:lower:]' |
        sed 's/cap_//g; s/ \+/,/g')
    ML=$(numfmt --from=iec "$(unit_value "$1" LimitMEMLOCK)")
    hard=$(ulimit -Hl)
    if [ "$hard" != unlimited ] && [ $((hard * 1024)) -lt "$ML" ]; then
        echo "note: the unit's LimitMEMLOCK=$(unit_value "$1" LimitMEMLOCK) is above this machine's hard limit ($hard KiB): runs here have $hard KiB"
        ML=$((hard * 1024))
    fi
}

# make_test_host: the namespace with its veth pair (198.18.0.1 on $A, .2 on $B, no IPv6
# chatter: only the runs' frames cross it) and the test user; exits on failure.
make_test_host() {
    ip netns add "$NS" && MADE_NS=1 || { fail "ip netns add $NS"; exit 1; }
    ip -n "$NS" link add "$A" type veth peer name "$B" &&
        ip -n "$NS" link set lo up && ip -n "$NS" link set "$A" up && ip -n "$NS" link set "$B" up &&
        ip -n "$NS" addr add 198.18.0.1/24 dev "$A" && ip -n "$NS" addr add 198.18.0.2/24 dev "$B" ||
        { fail "veth pair in $NS"; exit 1; }
    ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$TUSER" &&
        MADE_USER=1 || { fail "useradd $TUSER"; exit 1; }
}

# runas CAPS: sets RUNAS, the command prefix that runs what follows in the namespace as the
# test user with exactly CAPS (comma list, setpriv's names; empty: none), no new privileges,
# the locked-memory limit ML and an empty environment but PATH and HOME (what follows may
# start with NAME=VALUE words). Every part of it execs the next (no fork), so $! of a
# background "${RUNAS[@]}" CMD & is CMD's own PID.
runas() {
    local caps=$1 plus
    local capargs=(--inh-caps=-all --bounding-set=-all)
    if [ -n "$caps" ]; then
        plus=+${caps//,/,+}
        # shellcheck disable=SC2054  # the commas are setpriv's, inside one argument each
        capargs=(--inh-caps=-all,"$plus" --ambient-caps=-all,"$plus" --bounding-set=-all,"$plus")
    fi
    RUNAS=(prlimit --memlock="$ML:$ML" ip netns exec "$NS"
        setpriv --reuid="$TUSER" --regid="$TUSER" --init-groups --no-new-privs "${capargs[@]}"
        env -i PATH=/usr/bin:/bin HOME=/nonexistent)
}
