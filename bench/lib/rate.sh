# shellcheck shell=bash
# bench/lib/rate.sh — the throughput sections' runners (afxdp, afpacket, xdplive): each
# tool sends until SIGINT while rx0's counter gives the rate; each appends one JSON line
# to $RAW. Needs lib/common.sh and lib/lab.sh.
[[ -z "${BENCH_RATE_LOADED:-}" ]] || return 0
BENCH_RATE_LOADED=1

# measure_and_stop CASE ROUND PID LOG — receive rate at rx0 over DURATION seconds while
# PID sends (after a 1 s warm-up), then SIGINT to PID.
measure_and_stop() {
    local case="$1" round="$2" pid="$3" out="$4"
    if ! in_background python3 "$LIVE" rx-window --netns "$RX_NS" --dev rx0 --pid "$pid" --warmup 1 \
        --seconds "$DURATION" --frame-bytes "${RATE_FRAME_BYTES:-$FRAME_BYTES}" --case "$case" --round "$round" >>"$RAW"; then
        tail -n 20 "$out" >&2
        die "$case (round $round): measurement failed; tool output above (log: $out)"
    fi
    local rc=0
    if [[ "$case" == strobe* ]]; then
        finish_strobe "$pid" || rc=$?
    else
        finish "$pid" || rc=$?
    fi
    ((rc == 0)) || {
        tail -n 20 "$out" >&2
        die "$case (round $round) exited with status $rc after SIGINT (log: $out)"
    }
    log "$(printf '%-18s r%d  %s Mpps at rx0' "$case" "$round" \
        "$(tail -n 1 "$RAW" | python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)["mpps"])')")"
}

# rate_strobe CASE ROUND PORT — strobe, unpaced, until SIGINT; on STROBE_CPU, or on the
# CPUs in RATE_CPUS when set.
rate_strobe() {
    local case="$1" round="$2" port="$3"
    shift 3
    local report="$RUN_DIR/$case-r$round.json" out="$RUN_DIR/$case-r$round.txt"
    taskset -c "${RATE_CPUS:-$STROBE_CPU}" "$STROBE" gen -q --lab "$LAB_PREFIX" --port "$port" \
        --dst-mac "$SINK_MAC" --udp "$SRC_IP:$SRC_PORT-$DST_IP:$DST_PORT" --size "${RATE_SIZE:-64}" \
        --rate max --duration "$((DURATION + 60))s" --json "$report" "$@" >"$out" 2>&1 &
    local pid=$!
    track "$pid"
    measure_and_stop "$case" "$round" "$pid" "$out"
    python3 "$LIVE" annotate-strobe "$RAW" "$report"
}

# rate_strobe_gso ROUND — strobe's AF_PACKET in UDP segmentation batches (afpacket-gso):
# runs of frames with consecutive IP identifications leave as one superframe each, which
# the kernel cuts back into 60-byte frames before tx0's driver. tx0 must leave segmentation
# and checksums to the kernel for that, so only this run turns both offloads off (no other
# tool sends segmentation batches or asks for checksum offload, so they would not notice).
rate_strobe_gso() {
    local round="$1"
    ip netns exec "$TX_NS" ethtool -K tx0 tx-udp-segmentation off tx-checksumming off >/dev/null ||
        die "cannot turn tx0's segmentation and checksum offloads off"
    rate_strobe strobe-afpacket-gso "$round" lab:tx@afpacket-gso \
        --vary ip.identification=inc:0/1/65536
    ip netns exec "$TX_NS" ethtool -K tx0 tx-udp-segmentation on tx-checksumming on >/dev/null ||
        die "cannot turn tx0's offloads back on"
}

# rate_testpmd CASE ROUND VDEV — dpdk-testpmd txonly in the tx namespace until SIGINT,
# sending the same frame as strobe (its defaults differ in MAC, addresses, ports, length).
rate_testpmd() {
    local case="$1" round="$2" vdev="$3"
    local out="$RUN_DIR/$case-r$round.log"
    ip netns exec "$TX_NS" stdbuf -oL dpdk-testpmd --no-huge --no-pci -m 512 -l "$PEER_CPUS" \
        --file-prefix strobe-bench --vdev="$vdev" -- --forward-mode=txonly --stats-period 1 \
        --total-num-mbufs=16384 --eth-peer="0,$SINK_MAC" --tx-ip="$SRC_IP,$DST_IP" \
        --tx-udp="$SRC_PORT,$DST_PORT" --txpkts="$FRAME_BYTES" </dev/null >"$out" 2>&1 &
    local pid=$!
    track "$pid"
    measure_and_stop "$case" "$round" "$pid" "$out"
}

# rate_trafgen ROUND — trafgen from its TX ring (qdisc bypass, its default) until SIGINT.
rate_trafgen() {
    local round="$1"
    local out="$RUN_DIR/trafgen-r$round.log"
    start_trafgen "$out" --conf "$RUN_DIR/frame-sink.trafgen"
    check_trafgen_cpu
    measure_and_stop trafgen "$round" "$TRAFGEN_PID" "$out"
}
