#!/usr/bin/env bash
# Checks deploy/ on this machine, as root, in about a minute (two on a first run that builds
# the container base images):
#   1. `systemd-analyze verify` of deploy/systemd/strobe-agent.service;
#   2. the unit's capabilities, read from the unit itself: as a fresh non-root user with
#      exactly those (ambient, bounding, no-new-privs, the unit's locked-memory limit), on a
#      veth pair in a network namespace of its own: AF_PACKET and AF_XDP runs with exact
#      counts, and every capability shown necessary by a run that fails (or loses
#      SCHED_FIFO) without it;
#   3. `strobe serve` started by the unit's own ExecStart line (token and TLS from a
#      credentials directory), answering an OTG config and start over HTTPS with exact counts;
#   4. where containers run here (podman): the image of deploy/container built and run with
#      only those capabilities, answering the same; the host's firewall and forwarding
#      unchanged by it;
#   5. there too: the unit under a real systemd (PID 1 of a container), hardening and all.
# What cannot run here says "skipped: <reason>"; anything that should work and does not
# makes it exit 1. Everything it makes (namespace, user, processes, containers, images but
# the two cached bases, secrets, files) is removed on exit, also on failure.
#
#   bash tests/deploy/run.sh            STROBE_BIN=path/to/strobe to test another build
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
UNIT=${STROBE_UNIT:-$ROOT/deploy/systemd/strobe-agent.service}  # STROBE_UNIT: check another copy
TAG=dep$$ SUITE=deploy
BASE_IMAGE=localhost/strobe-base:bookworm            # cached: podman rmi removes it
SYSTEMD_BASE=localhost/strobe-systemd-base:bookworm  # cached likewise
CONTAINERS=() IMAGES=() SECRETS=()
# shellcheck source=../lib/unit_host.sh
. "$ROOT/tests/lib/unit_host.sh"
extra_cleanup() {
    local p
    for p in "${CONTAINERS[@]}"; do podman rm -f -t 2 "$p" >/dev/null 2>&1; done
    for p in "${IMAGES[@]}"; do podman rmi -f "$p" >/dev/null 2>&1; done
    for p in "${SECRETS[@]}"; do podman secret rm "$p" >/dev/null 2>&1; done
}

if [ "$(id -u)" != 0 ]; then
    fail "needs root (namespaces, a test user, setpriv)"
    exit 1
fi
for tool in ip setpriv prlimit useradd python3 openssl; do
    command -v "$tool" >/dev/null || { fail "$tool is missing (iproute2, util-linux, passwd, python3, openssl)"; exit 1; }
done

BIN=${STROBE_BIN:-$ROOT/target/debug/strobe}
if [ ! -x "$BIN" ]; then
    (cd "$ROOT" && cargo build -q -p strobe-cli) || { fail "cargo build -p strobe-cli"; exit 1; }
fi

# --- 1. the unit file -----------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
    # Unknown keys are only warnings: any output counts as a failure.
    out=$(systemd-analyze verify "$UNIT" 2>&1)
    if [ $? = 0 ] && [ -z "$out" ]; then pass "systemd-analyze verify strobe-agent.service"
    else fail "systemd-analyze verify: $out"; fi
else
    skip "systemd-analyze is not installed (Debian: apt-get install systemd)"
fi

CAPS=$(unit_value "$UNIT" AmbientCapabilities)
if [ -z "$CAPS" ] || [ "$CAPS" != "$(unit_value "$UNIT" CapabilityBoundingSet)" ]; then
    fail "AmbientCapabilities= ($CAPS) and CapabilityBoundingSet= differ or are empty"
    exit 1
fi
# CAP_NET_RAW CAP_BPF -> net_raw,bpf (setpriv, from unit_limits) and NET_RAW,BPF (podman)
PODMAN_CAPS=$(echo "$CAPS" | sed 's/CAP_//g; s/ \+/,/g')
unit_limits "$UNIT"
echo "unit: capabilities $CAPS; locked memory $ML bytes"

# --- the test host: a veth pair in a namespace, a user with nothing ------------------------
WORK=$(mktemp -d "/tmp/$TAG.XXXXXX")
chmod 755 "$WORK"
mkdir -p "$WORK/bin" && cp "$BIN" "$WORK/bin/strobe" && chmod 755 "$WORK/bin/strobe"
make_test_host

without() { echo ",$SETPRIV_CAPS," | sed "s/,$1,/,/; s/^,//; s/,$//"; }

# gen_run CAPS TX RX: 1000 frames at 10 kpps; sets OUT (stdout+stderr) and ROW (the flow's
# "tx rx lost" counts).
gen_run() {
    runas "$1"
    OUT=$(timeout 60 "${RUNAS[@]}" STROBE_DB=none "$WORK/bin/strobe" gen -q --port "$2" --rx "$3" \
        --udp 198.18.0.1:1000-198.18.0.2:2000 --count 1000 --rate 10kpps 2>&1)
    ROW=$(echo "$OUT" | awk '$1 == "udp" && NF > 8 { print $2, $3, $4; exit }')
}
exact() {  # exact WHAT CAPS TX RX
    gen_run "$2" "$3" "$4"
    if [ "$ROW" = "1000 1000 0" ]; then pass "$1: 1000 sent, 1000 received ($(echo "$OUT" | grep -o 'copy mode\|zero-copy\|TPACKET_V[23] [RT]X' | sort -u | paste -sd, -))"
    else fail "$1: counts '$ROW':"$'\n'"$OUT"; fi
}

# --- 2. capabilities ------------------------------------------------------------------------
exact "AF_PACKET with the unit's capabilities" "$SETPRIV_CAPS" "afpacket:$A" "afpacket:$B"
exact "AF_XDP with the unit's capabilities" "$SETPRIV_CAPS" "afxdp:$A" "afxdp:$B"

gen_run "" "afpacket:$A" "afpacket:$B"
if echo "$OUT" | grep -q "CAP_NET_RAW" && [ -z "$ROW" ]; then pass "with no capability strobe refuses, naming CAP_NET_RAW"
else fail "with no capability: $OUT"; fi

# Every capability of the unit must be shown necessary by what fails without it.
FIFO_OK=1
if ! chrt -f 1 true 2>/dev/null; then FIFO_OK="root itself cannot use SCHED_FIFO here (chrt -f 1 true fails: a cgroup without real-time budget?)"
elif [ "$(nproc)" -lt 2 ]; then FIFO_OK="one CPU: strobe does not ask for SCHED_FIFO"
elif [ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = -1 ]; then FIFO_OK="real-time throttling is off: strobe does not ask for SCHED_FIFO"; fi
for cap in ${SETPRIV_CAPS//,/ }; do
    rest=$(without "$cap")
    case $cap in
    net_raw)
        gen_run "$rest" "afpacket:$A" "afpacket:$B"
        if echo "$OUT" | grep -q "CAP_NET_RAW" && [ -z "$ROW" ]; then pass "without CAP_NET_RAW: AF_PACKET refused ($(echo "$OUT" | grep -m1 -o 'socket(AF_PACKET)[^)]*)'))"
        else fail "without CAP_NET_RAW AF_PACKET still ran: $OUT"; fi ;;
    net_admin | bpf)
        gen_run "$rest" "afxdp:$A" "afxdp:$B"
        if echo "$OUT" | grep -q "XSKMAP.*Operation not permitted" && [ -z "$ROW" ]; then pass "without CAP_${cap^^}: AF_XDP receive refused (cannot create the XSKMAP: EPERM)"
        else fail "without CAP_${cap^^} AF_XDP receive still ran: $OUT"; fi ;;
    sys_nice)
        if [ "$FIFO_OK" != 1 ]; then skip "CAP_SYS_NICE's effect: $FIFO_OK"; continue; fi
        gen_run "$SETPRIV_CAPS" "afpacket:$A" "afpacket:$B"
        with=$OUT
        gen_run "$rest" "afpacket:$A" "afpacket:$B"
        if ! echo "$with" | grep -q "SCHED_FIFO refused" && echo "$OUT" | grep -q "SCHED_FIFO refused.*CAP_SYS_NICE"; then
            pass "without CAP_SYS_NICE: paced workers lose SCHED_FIFO ($(echo "$OUT" | grep -m1 -o 'SCHED_FIFO refused ([^)]*)'))"
        else fail "CAP_SYS_NICE: with it: $(echo "$with" | grep waiting:) / without: $(echo "$OUT" | grep waiting:)"; fi ;;
    *) fail "CAP_${cap^^} is in the unit but no experiment here shows why it is needed" ;;
    esac
done

# --- 3. strobe serve through the unit's ExecStart ---------------------------------------------
# systemd hands the service a private copy of each credential; here: a directory the user
# owns. ExecStart's $$ is the shell's $; /usr/bin/strobe is the binary under test.
CRED=$WORK/credentials STATE=$WORK/state
mkdir -p "$CRED" "$STATE"
openssl rand -hex 16 > "$CRED/token"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=strobe-agent \
    -keyout "$CRED/tls-key" -out "$CRED/tls-cert" >/dev/null 2>&1 || { fail "openssl req"; exit 1; }
chown -R "$TUSER:" "$CRED" "$STATE" && chmod 500 "$CRED" && chmod 400 "$CRED"/*
TOKEN=$(cat "$CRED/token")
EXEC=$(unit_value "$UNIT" ExecStart)
SCRIPT=$(echo "$EXEC" | sed "s/^[^']*'//; s/'\$//; s/\\\$\\\$/\$/g; s#/usr/bin/strobe#$WORK/bin/strobe#")
case $EXEC in "/bin/sh -c '"*) ;; *) fail "ExecStart is not /bin/sh -c '…' any more: update this test"; exit 1 ;; esac

wait_listening() {  # wait_listening PID: up to 10 s for 198.18.0.1:8443 in the namespace
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 1
        ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/198.18.0.1/8443' 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
otg() {  # otg WHAT TX RX
    local out
    if out=$(ip netns exec "$NS" timeout 60 python3 "$HERE/otg_check.py" https://198.18.0.1:8443 "$TOKEN" "$2" "$3" 1000 2>&1)
    then pass "$1: $(echo "$out" | tail -1 | sed 's/^otg_check: //')"
    else fail "$1: $out"; fi
}

runas "$SETPRIV_CAPS"
"${RUNAS[@]}" STROBE_DB=none STROBE_LISTEN=198.18.0.1:8443 STROBE_TLS_CERT="$CRED/tls-cert" \
    STROBE_TLS_KEY="$CRED/tls-key" STROBE_ARGS="--drain 200ms" CREDENTIALS_DIRECTORY="$CRED" \
    STROBE_DB="$STATE/runs.db" STROBE_STATE_DIR="$STATE" sh -c "$SCRIPT" > "$WORK/serve.log" 2>&1 &
SERVE=$!
PIDS+=("$SERVE")
if wait_listening "$SERVE"; then
    otg "serve (the unit's ExecStart, its capabilities), AF_PACKET" "afpacket:$A" "afpacket:$B"
    otg "serve (the unit's ExecStart, its capabilities), AF_XDP" "afxdp:$A" "afxdp:$B"
    kill -TERM "$SERVE"
    if timeout 15 tail --pid="$SERVE" -f /dev/null; then
        wait "$SERVE"; rc=$?
        if [ $rc = 0 ] && [ -s "$STATE/runs.db" ]; then pass "serve stops on SIGTERM (exit 0) and kept its run history in the state directory"
        else fail "serve after SIGTERM: exit $rc, history $(ls -l "$STATE")"; fi
    else fail "serve did not stop within 15 s of SIGTERM"; fi
else
    fail "serve did not listen: $(cat "$WORK/serve.log")"
fi

# --- 4. the container image -------------------------------------------------------------------
containers() {
    if ! command -v podman >/dev/null; then
        skip "container image: podman is not installed (apt-get install podman runc debootstrap; see deploy/README.md)"
        return 1
    fi
    # Lowering limits is always allowed; podman's defaults (1048576 files) need CAP_SYS_RESOURCE.
    ULIM=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
    if ! podman image exists "$BASE_IMAGE"; then
        if ! command -v debootstrap >/dev/null; then
            skip "container image: no $BASE_IMAGE and no debootstrap to make it (apt-get install debootstrap)"
            return 1
        fi
        local mirror rootfs=$WORK/rootfs
        mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
        echo "making $BASE_IMAGE with debootstrap from ${mirror:=http://deb.debian.org/debian} (once; kept)"
        if ! timeout 300 debootstrap --variant=minbase --include=iproute2,procps,ca-certificates \
            bookworm "$rootfs" "$mirror" > "$WORK/debootstrap.log" 2>&1; then
            skip "container image: debootstrap failed: $(tail -3 "$WORK/debootstrap.log")"
            return 1
        fi
        tar -C "$rootfs" -c . | podman import - "$BASE_IMAGE" > "$WORK/import.log" 2>&1 ||
            { fail "podman import: $(tail -3 "$WORK/import.log")"; return 1; }
        rm -rf "$rootfs"
    fi
    local err
    RT=()
    if ! err=$(timeout 60 podman run --rm --network=none "${ULIM[@]}" "$BASE_IMAGE" true 2>&1); then
        if echo "$err" | grep -q "hybrid mode" && command -v runc >/dev/null; then
            echo "note: crun refuses this host's cgroups ($err): using runc"
            RT=(--runtime runc)
            err=$(timeout 60 podman run --rm "${RT[@]}" --network=none "${ULIM[@]}" "$BASE_IMAGE" true 2>&1) ||
                { skip "containers cannot run here: $err"; return 1; }
        else
            skip "containers cannot run here: $err"
            return 1
        fi
    fi
    return 0
}

# What a container engine or a container's systemd could change on the host: the nftables
# ruleset, the root namespace's forwarding and filtering, and global (not per-namespace)
# sysctls that systemd sets at boot (a privileged container's systemd-sysctl and PID 1 did
# write fs.file-max and fs.protected_* of this host once: hence no --privileged below).
HOST_SYSCTLS="net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.rp_filter
    net.ipv4.conf.default.rp_filter net.bridge.bridge-nf-call-iptables
    net.bridge.bridge-nf-call-ip6tables fs.file-max fs.nr_open fs.protected_fifos
    fs.protected_regular fs.protected_symlinks fs.protected_hardlinks fs.suid_dumpable
    kernel.pid_max kernel.core_pattern kernel.sched_rt_runtime_us kernel.sysrq
    kernel.unprivileged_bpf_disabled kernel.perf_event_paranoid kernel.kptr_restrict
    kernel.dmesg_restrict net.core.bpf_jit_enable vm.max_map_count vm.overcommit_memory"
firewall_state() {
    local k
    nft list ruleset 2>/dev/null
    for k in $HOST_SYSCTLS; do echo "$k = $(sysctl -n "$k" 2>/dev/null)"; done
}

host_caps_of() {  # host_caps_of PID: its uid, capability sets, no_new_privs, seccomp mode
    awk '/^(Uid|CapEff|CapAmb|CapBnd|NoNewPrivs|Seccomp):/ { printf "%s %s ", $1, $2 }' "/proc/$1/status"
}

# The unit's capabilities as a mask, to compare with /proc/PID/status.
capmask() {
    python3 - "$CAPS" <<'EOF'
import sys
nums = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_SYS_NICE": 23,
        "CAP_SYS_ADMIN": 21, "CAP_NET_BIND_SERVICE": 10, "CAP_PERFMON": 38, "CAP_BPF": 39}
print(format(sum(1 << nums[c] for c in sys.argv[1].split()), "016x"))
EOF
}
MASK=$(capmask)

if containers; then
    FW_BEFORE=$(firewall_state)
    ctx=$WORK/ctx
    mkdir -p "$ctx" && cp "$WORK/bin/strobe" "$ROOT/deploy/container/entrypoint.sh" "$ctx/"
    IMAGE=localhost/strobe-agent:$TAG
    IMAGES+=("$IMAGE")  # before it exists: an interrupted build is removed too
    if out=$(timeout 120 podman build "${RT[@]}" --network=none -f "$ROOT/deploy/container/Containerfile" \
        --build-arg BASE="$BASE_IMAGE" -t "$IMAGE" "$ctx" 2>&1); then
        pass "podman build deploy/container/Containerfile (FROM $BASE_IMAGE)"
        python3 "$ROOT/deploy/container/seccomp-bpf.py" > "$WORK/seccomp.json"
        mkdir -p "$WORK/tls" && cp "$CRED/tls-cert" "$WORK/tls/cert.pem" && cp "$CRED/tls-key" "$WORK/tls/key.pem"
        chown -R 65532:65532 "$WORK/tls" && chmod 400 "$WORK/tls"/*
        SECRETS+=("$TAG-token")
        podman secret create "$TAG-token" "$CRED/token" >/dev/null
        name=$TAG-agent
        CONTAINERS+=("$name")
        if out=$(podman run -d --name "$name" "${RT[@]}" "${ULIM[@]}" --ulimit "memlock=$ML:$ML" \
            --network "ns:/run/netns/$NS" --cap-drop=all --cap-add="$PODMAN_CAPS" \
            --security-opt no-new-privileges --security-opt seccomp="$WORK/seccomp.json" \
            --secret "$TAG-token,target=strobe-token" -v "$WORK/tls:/etc/strobe/tls:ro" \
            -e STROBE_LISTEN=198.18.0.1:8443 "$IMAGE" --drain 200ms 2>&1); then
            pid=$(podman inspect -f '{{.State.Pid}}' "$name")
            if wait_listening "$pid"; then
                got=$(host_caps_of "$pid")
                if echo "$got" | grep -q "Uid: 65532 .*CapEff: $MASK .*CapAmb: $MASK .*NoNewPrivs: 1 Seccomp: 2"; then
                    pass "agent container: user 65532, exactly $CAPS, no new privileges, seccomp"
                else fail "agent container's process: $got (expected CapEff/CapAmb $MASK)"; fi
                otg "agent container, AF_PACKET" "afpacket:$A" "afpacket:$B"
                otg "agent container, AF_XDP (seccomp-bpf.py's profile)" "afxdp:$A" "afxdp:$B"
            else
                fail "agent container did not listen: $(podman logs "$name" 2>&1 | tail -5)"
            fi
            podman rm -f -t 5 "$name" >/dev/null 2>&1
        else
            fail "podman run of the agent image: $out"
        fi
    else
        fail "podman build: $(echo "$out" | tail -5)"
    fi

    # --- 5. the unit under systemd, in a container ---------------------------------------------
    if ! podman image exists "$SYSTEMD_BASE"; then
        echo "making $SYSTEMD_BASE ($BASE_IMAGE with systemd from Debian; once; kept)"
        mkdir -p "$WORK/sdbase"
        printf 'FROM %s\nRUN apt-get update && apt-get install -y --no-install-recommends systemd systemd-sysv dbus && apt-get clean && rm -rf /var/lib/apt/lists/*\nCMD ["/sbin/init"]\n' \
            "$BASE_IMAGE" > "$WORK/sdbase/Containerfile"
        out=$(timeout 240 podman build "${RT[@]}" --network=host -t "$SYSTEMD_BASE" "$WORK/sdbase" 2>&1) ||
            SDSKIP="cannot install systemd into $BASE_IMAGE: $(echo "$out" | tail -3)"
    fi
    if [ -n "${SDSKIP:-}" ]; then
        skip "the unit under systemd: $SDSKIP"
    else
        sd=$WORK/sd
        mkdir -p "$sd/dropin" "$sd/etc/tls"
        cp "$WORK/bin/strobe" "$UNIT" "$sd/"
        # systemd leaves / private in a container, and then the credentials it mounts for a
        # service in a namespace of its own never reach the service (an empty, unreadable
        # $CREDENTIALS_DIRECTORY): / made shared first, as systemd itself does on a host.
        printf 'FROM %s\nCOPY strobe /usr/bin/strobe\nCOPY strobe-agent.service /etc/systemd/system/\nCMD ["/bin/sh", "-c", "mount --make-rshared / && exec /sbin/init"]\n' "$SYSTEMD_BASE" > "$sd/Containerfile"
        # As on a real host: /etc/strobe with the token and TLS files, root's own (0600), that
        # LoadCredential= copies for the service. Only the locked-memory limit differs (above).
        install -m 600 "$CRED/token" "$sd/etc/token"
        install -m 600 "$CRED/tls-cert" "$sd/etc/tls/cert.pem"
        install -m 600 "$CRED/tls-key" "$sd/etc/tls/key.pem"
        cat > "$sd/dropin/test.conf" <<EOF
[Service]
Environment=STROBE_LISTEN=198.18.0.1:8443
Environment="STROBE_ARGS=--drain 200ms"
LimitMEMLOCK=$ML
EOF
        SDIMAGE=localhost/strobe-systemd-test:$TAG
        IMAGES+=("$SDIMAGE")
        if out=$(timeout 60 podman build "${RT[@]}" --network=none -t "$SDIMAGE" "$sd" 2>&1); then
            name=$TAG-systemd
            CONTAINERS+=("$name")
            # Not --privileged: that leaves /proc/sys writable, and systemd at boot writes global
            # sysctls of the host. SYS_ADMIN for systemd's namespaces, and the unit's caps.
            if out=$(podman run -d --name "$name" "${RT[@]}" "${ULIM[@]}" --systemd=always \
                --cap-add="SYS_ADMIN,$PODMAN_CAPS" \
                --network "ns:/run/netns/$NS" -v "$sd/etc:/etc/strobe:ro" \
                -v "$sd/dropin:/etc/systemd/system/strobe-agent.service.d:ro" "$SDIMAGE" 2>&1); then
                for _ in $(seq 50); do
                    state=$(podman exec "$name" systemctl is-system-running 2>/dev/null)
                    case $state in running | degraded) break ;; esac
                    sleep 0.2
                done
                podman exec "$name" systemctl start strobe-agent
                mainpid=$(podman exec "$name" systemctl show -P MainPID strobe-agent)
                hostpid="" cid=$(podman inspect -f '{{.Id}}' "$name")
                for _ in $(seq 50); do
                    for p in $(grep -l "$cid.*strobe-agent.service" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3); do
                        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = strobe ] && hostpid=$p
                    done
                    [ -n "$hostpid" ] && wait_listening "$hostpid" && break
                    sleep 0.2
                done
                if [ -n "$hostpid" ] && wait_listening "$hostpid"; then
                    got=$(host_caps_of "$hostpid")
                    if echo "$got" | grep -q "CapEff: $MASK .*CapBnd: $MASK CapAmb: $MASK .*NoNewPrivs: 1 Seccomp: 2" &&
                        ! echo "$got" | grep -q "Uid: 0 "; then
                        pass "the unit under systemd: a dynamic user, exactly $CAPS, no new privileges, seccomp, token and TLS from LoadCredential= (main pid $mainpid)"
                    else fail "the unit under systemd: its process: $got (expected $MASK)"; fi
                    otg "the unit under systemd (its hardening), AF_PACKET" "afpacket:$A" "afpacket:$B"
                    otg "the unit under systemd (its hardening), AF_XDP" "afxdp:$A" "afxdp:$B"
                else
                    fail "the unit under systemd did not listen: $(podman exec "$name" journalctl -u strobe-agent --no-pager -n 8 2>&1)"
                fi
                podman rm -f -t 5 "$name" >/dev/null 2>&1
            else
                fail "podman run --systemd=always: $out"
            fi
        else
            fail "podman build of the systemd test image: $(echo "$out" | tail -3)"
        fi
    fi

    FW_AFTER=$(firewall_state)
    if [ "$FW_BEFORE" = "$FW_AFTER" ]; then pass "the host's nftables ruleset, forwarding, filtering and global sysctls are as they were"
    else fail "containers changed the host's firewall, forwarding or sysctls:"$'\n'"$(diff <(echo "$FW_BEFORE") <(echo "$FW_AFTER"))"; fi
fi
