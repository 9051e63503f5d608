# shellcheck shell=bash
# shellcheck disable=SC2034 # the addresses and filters are read by the sections' scripts
# bench/lib/lab.sh — the live sections' labs and what they share: the cable lab (tx0 in
# $TX_NS, rx0 in $RX_NS) and the truth and trains sections' own labs, all removed by
# cleanup (lib/common.sh) on exit; receive steering, rx0's counter, trafgen, tcpdump at
# rx0 and the metadata of a live run. Needs lib/common.sh.
[[ -z "${BENCH_LAB_LOADED:-}" ]] || return 0
BENCH_LAB_LOADED=1

TX_NS="$LAB_PREFIX-tx"
RX_NS="$LAB_PREFIX-rx"
# The lab's addresses (`strobe lab status`); every tool sends this one UDP flow.
SRC_IP=198.18.0.1
DST_IP=198.18.1.1
SRC_PORT=1000
DST_PORT=2000
# 64-byte frames counting the FCS, as strobe's --size means it: 60 bytes reach rx0.
FRAME_BYTES=60
# The UDP payload that makes a 60-byte frame (14 Ethernet + 20 IPv4 + 8 UDP + 18).
PAYLOAD_BYTES=18

# lab_up — the cable lab (tx0 in $TX_NS, rx0 in $RX_NS), once per invocation.
lab_up() {
    ((LAB_CREATED)) && return
    [[ ${#LAB_PREFIX} -le 11 && "$LAB_PREFIX" =~ ^[a-z][a-z0-9-]*$ ]] ||
        die "LAB_PREFIX must be at most 11 lowercase letters, digits or '-', got '$LAB_PREFIX'"
    # Another run's lab must not be reused and then torn down under it.
    if ip netns list | grep -qE "^$LAB_PREFIX-(tx|rx|dut)( |$)"; then
        die "a lab '$LAB_PREFIX' already exists (another bench/run, or a leftover): remove it with '$STROBE lab down --prefix $LAB_PREFIX' or set LAB_PREFIX"
    fi
    # Set first, so a half-built lab is removed on exit as well.
    LAB_CREATED=1
    "$STROBE" lab up --prefix "$LAB_PREFIX" --dut cable >&2 ||
        die "strobe lab up --prefix $LAB_PREFIX --dut cable failed; output above"
    TX_MAC="$(iface_mac "$TX_NS" tx0)"
    RX_MAC="$(iface_mac "$RX_NS" rx0)"
    LAB_RPS_MASK="$(ip netns exec "$RX_NS" cat /sys/class/net/rx0/queues/rx-0/rps_cpus)" ||
        die "cannot read rx0's receive steering (rps_cpus)"
}

# rx_steering lab|off — receive packet steering of rx0 on every receive queue: the lab's
# own mask (receive work on the cores other than the transmit core) or none (it stays on
# the sending core).
rx_steering() {
    local mask=0
    [[ "$1" == lab || "$1" == off ]] || die "receive steering must be lab or off, not '$1'"
    [[ "$1" == lab ]] && mask="$LAB_RPS_MASK"
    ip netns exec "$RX_NS" sh -c "for q in /sys/class/net/rx0/queues/rx-*/rps_cpus; do echo $mask > \$q || exit 1; done" ||
        die "cannot set rx0's rps_cpus to $mask"
}

iface_mac() { # iface_mac NETNS DEV
    local mac
    mac="$(ip -n "$1" -br link show dev "$2" | awk '{print $3}')"
    [[ "$mac" =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ ]] || die "cannot read the MAC address of $2 in $1 (got '$mac')"
    printf '%s\n' "$mac"
}

# truth_lab_up — the bridge lab of the truth section (its own prefix, next to the cable lab).
truth_lab_up() {
    ((TRUTH_LAB_CREATED)) && return
    [[ ${#TRUTH_LAB_PREFIX} -le 11 && "$TRUTH_LAB_PREFIX" =~ ^[a-z][a-z0-9-]*$ ]] ||
        die "TRUTH_LAB_PREFIX must be at most 11 lowercase letters, digits or '-', got '$TRUTH_LAB_PREFIX'"
    [[ "$TRUTH_LAB_PREFIX" != "$LAB_PREFIX" ]] || die "TRUTH_LAB_PREFIX must differ from LAB_PREFIX ('$LAB_PREFIX')"
    if ip netns list | grep -qE "^$TRUTH_LAB_PREFIX-(tx|rx|dut)( |$)"; then
        die "a lab '$TRUTH_LAB_PREFIX' already exists (another bench/run, or a leftover): remove it with '$STROBE lab down --prefix $TRUTH_LAB_PREFIX' or set TRUTH_LAB_PREFIX"
    fi
    TRUTH_LAB_CREATED=1
    "$STROBE" lab up --prefix "$TRUTH_LAB_PREFIX" --dut bridge >&2 ||
        die "strobe lab up --prefix $TRUTH_LAB_PREFIX --dut bridge failed; output above"
}

# trains_lab DUT — (re)build the trains section's lab with DUT (a tbf shaper).
trains_lab() {
    [[ ${#TRAINS_LAB_PREFIX} -le 11 && "$TRAINS_LAB_PREFIX" =~ ^[a-z][a-z0-9-]*$ ]] ||
        die "TRAINS_LAB_PREFIX must be at most 11 lowercase letters, digits or '-', got '$TRAINS_LAB_PREFIX'"
    [[ "$TRAINS_LAB_PREFIX" != "$LAB_PREFIX" ]] || die "TRAINS_LAB_PREFIX must differ from LAB_PREFIX ('$LAB_PREFIX')"
    if ((TRAINS_LAB_CREATED)); then
        "$STROBE" lab down --prefix "$TRAINS_LAB_PREFIX" >&2 || die "cannot remove lab '$TRAINS_LAB_PREFIX'"
    elif ip netns list | grep -qE "^$TRAINS_LAB_PREFIX-(tx|rx|dut)( |$)"; then
        die "a lab '$TRAINS_LAB_PREFIX' already exists (another bench/run, or a leftover): remove it with '$STROBE lab down --prefix $TRAINS_LAB_PREFIX' or set TRAINS_LAB_PREFIX"
    fi
    TRAINS_LAB_CREATED=1
    "$STROBE" lab up --prefix "$TRAINS_LAB_PREFIX" --dut "$1" >&2 ||
        die "strobe lab up --prefix $TRAINS_LAB_PREFIX --dut $1 failed; output above"
}

# write_trafgen_config FILE DST_MAC — the frame every tool sends: tx0's MAC to DST_MAC,
# IPv4 without options or flags, TTL 64, UDP without checksum, 18 zero bytes (as testpmd).
write_trafgen_config() {
    local bytes_dst="0x${2//:/, 0x}" bytes_src="0x${TX_MAC//:/, 0x}"
    local ip_len=$((20 + 8 + PAYLOAD_BYTES)) udp_len=$((8 + PAYLOAD_BYTES))
    cat >"$1" <<EOF
{
  $bytes_dst,
  $bytes_src,
  c16(0x0800),
  0x45, 0x00, c16($ip_len), c16(0), c16(0), 64, 17, csumip(14, 33),
  ${SRC_IP//./, },
  ${DST_IP//./, },
  c16($SRC_PORT), c16($DST_PORT), c16($udp_len), c16(0),
  fill(0x00, $PAYLOAD_BYTES)
}
EOF
}

rx_packets() { # rx_packets — rx0's receive counter
    ip -n "$RX_NS" -s -j link show dev rx0 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'
}

# start_trafgen LOG ARGS... — trafgen in the tx namespace, its worker on STROBE_CPU; sets
# TRAFGEN_PID. trafgen pins worker i to CPU i itself right after forking it (so --cpus 1
# means CPU 0), hence the worker is moved once it has started sending. Without
# --no-sock-mem and --notouch-irq it would rewrite socket memory sysctls and IRQ
# affinities, which are not this script's to change.
start_trafgen() {
    local out="$1"
    shift
    local before
    before="$(rx_packets)"
    ip netns exec "$TX_NS" taskset -c "$STROBE_CPU" trafgen --dev tx0 --cpus 1 \
        --no-sock-mem --notouch-irq "$@" >"$out" 2>&1 &
    TRAFGEN_PID=$!
    track "$TRAFGEN_PID"
    local deadline=$((SECONDS + 30)) worker=""
    while [[ -z "$worker" ]] || (($(rx_packets) == before)); do
        alive "$TRAFGEN_PID" || {
            cat "$out" >&2
            die "trafgen exited before sending (log: $out)"
        }
        ((SECONDS < deadline)) || die "trafgen sent nothing within 30 s (log: $out)"
        worker="$(pgrep -P "$TRAFGEN_PID" | head -n 1 || true)"
    done
    taskset -pc "$STROBE_CPU" "$worker" >/dev/null ||
        die "cannot move trafgen's worker (PID $worker) to CPU $STROBE_CPU"
    TRAFGEN_WORKER="$worker"
}

# check_trafgen_cpu — the worker must still be where start_trafgen put it.
check_trafgen_cpu() {
    local cpus
    cpus="$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$TRAFGEN_WORKER/status" 2>/dev/null || true)"
    [[ -z "$cpus" || "$cpus" == "$STROBE_CPU" ]] ||
        die "trafgen's worker runs on CPUs $cpus instead of $STROBE_CPU; the comparison would be unfair"
}

live_meta() { # live_meta KEY VALUE... — machine_meta plus the build, the lab and the cores
    # The lab may steer receive work to other cores (RPS); that changes every result.
    local rps
    rps="$(ip netns exec "$RX_NS" cat /sys/class/net/rx0/queues/rx-0/rps_cpus 2>/dev/null || echo unknown)"
    machine_meta "$ROOT" strobe_built_from "$STROBE_BUILT_FROM" lab_prefix "$LAB_PREFIX" \
        rx0_rps_cpus "$rps" strobe_cpu "$STROBE_CPU" peer_cpus "$PEER_CPUS" sink_cpu "$SINK_CPU" "$@"
}

# Captures at rx0 (precision, wire, pacing).

# Only the flow's data frames: not ARP, not the ICMP errors rx0 sends back (-Q in), not
# iperf3's 4-byte UDP hello (its frames are 46 bytes).
CAPTURE_FILTER="udp and src host $SRC_IP and dst host $DST_IP and len = $FRAME_BYTES"

# Only the flow's data frames; D-ITG picks its own source port and sends 62-byte frames.
WIRE_FILTER="udp and src host $SRC_IP and dst host $DST_IP and dst port $DST_PORT"

# capture_start PCAP LOG [FILTER] — tcpdump on rx0 (SINK_CPU); sets CAPTURE_PID once it
# listens. No --immediate-mode: on this kernel it held frames back.
capture_start() {
    ip netns exec "$RX_NS" taskset -c "$SINK_CPU" tcpdump -i rx0 -Q in -n -B 65536 \
        --time-stamp-precision=nano -w "$1" "${3:-$CAPTURE_FILTER}" 2>"$2" &
    CAPTURE_PID=$!
    track "$CAPTURE_PID"
    local tenths=0
    until grep -q 'listening on' "$2" 2>/dev/null; do
        alive "$CAPTURE_PID" || {
            cat "$2" >&2
            die "tcpdump exited before capturing (log: $2)"
        }
        ((tenths < 100)) || die "tcpdump did not start within 10 s (log: $2)"
        sleep 0.1
        tenths=$((tenths + 1))
    done
}

# capture_stop LOG — libpcap hands a partly filled ring block over only when its 1 s
# timeout expires, so wait that long before SIGINT or the last frames are lost.
capture_stop() {
    sleep 1.5
    finish "$CAPTURE_PID" || die "tcpdump exited with an error (log: $1)"
}
