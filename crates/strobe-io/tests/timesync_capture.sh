#!/bin/bash
# Captures real `pmc` answers from two ptp4l instances for the parser fixtures in
# crates/strobe-io/src/timesync/. Needs root, linuxptp and iproute2.
#
#   bash crates/strobe-io/tests/timesync_capture.sh [OUTDIR]
#
# Namespace `tsync<PID>a` runs the grandmaster (priority1 100, two ports: one towards the
# slave, one towards a namespace with no ptp4l); `tsync<PID>b` runs the slave. Software
# timestamping over a veth pair, PTP over Ethernet (-2), so no address is needed.
#
# The machine has one system clock, shared by every namespace, and it must never be
# adjusted. Both ptp4l run without CAP_SYS_TIME in their bounding set, so the kernel refuses
# every clock adjustment they attempt (ptp4l logs "Operation not permitted"). The grandmaster
# also runs with free_running 1. The slave cannot: linuxptp 3.1's free-running servo always
# reports SERVO_UNLOCKED, so the port stays UNCALIBRATED forever (observed for over 40 s);
# with free_running 0 its PI servo locks and the port becomes SLAVE while every adjustment
# it tries fails.
#
# Everything started here is stopped by PID and the namespaces are deleted on exit.
set -euo pipefail
out=${1:-$(dirname "$0")/../src/timesync}
mkdir -p "$out"
tag=tsync$$
dir=$(mktemp -d /tmp/tsync.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for ns in a b c; do ip netns del "$tag$ns" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

for ns in a b c; do ip netns add "$tag$ns"; ip -n "$tag$ns" link set lo up; done
ip link add "${tag}a0" netns "${tag}a" type veth peer name "${tag}b0" netns "${tag}b"
ip link add "${tag}a1" netns "${tag}a" type veth peer name "${tag}c0" netns "${tag}c"
for l in a:a0 a:a1 b:b0 c:c0; do ip -n "$tag${l%%:*}" link set "$tag${l#*:}" up; done

conf() { # side priority1 free_running
  cat > "$dir/$1.conf" <<C
[global]
priority1 $2
free_running $3
uds_address $dir/ptp4l-$1
summary_interval 0
C
}
conf a 100 1
conf b 128 0
start() { # side ifaces...
  local side=$1; shift
  local ifs=(); for i in "$@"; do ifs+=(-i "$i"); done
  ip netns exec "$tag$side" setpriv --bounding-set -sys_time --inh-caps=-sys_time -- \
    ptp4l -2 -S -m "${ifs[@]}" -f "$dir/$side.conf" > "$dir/$side.log" 2>&1 &
  pids+=($!)
  sleep 0.2
  if grep -q '^CapEff:.*' /proc/$!/status && \
     (( (0x$(awk '/^CapEff/ {print $2}' /proc/$!/status) >> 25) & 1 )); then
    echo "ptp4l $! still holds CAP_SYS_TIME: refusing to go on" >&2; exit 1
  fi
}
cmds=('GET TIME_STATUS_NP' 'GET PORT_DATA_SET' 'GET CURRENT_DATA_SET' 'GET PORT_PROPERTIES_NP' 'GET TIME_PROPERTIES_DATA_SET')
ask() { pmc -u -b 0 -s "$dir/ptp4l-$1" "${cmds[@]}"; }
state() { ask "$1" | awk '/portState/ {print $2; exit}'; }

t0=$(date +%s%N)
start a "${tag}a0" "${tag}a1"
start b "${tag}b0"
sleep 1
ask b > "$out/pmc_listening.txt"
seen_uncal=0
for _ in $(seq 1 120); do
  s=$(state b || true)
  if [ "$s" = UNCALIBRATED ] && [ $seen_uncal = 0 ]; then
    ask b > "$out/pmc_uncalibrated.txt"; seen_uncal=1
    echo "UNCALIBRATED after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  fi
  [ "$s" = SLAVE ] && break
  sleep 0.5
done
echo "slave state: $s after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
[ "$s" = SLAVE ] || { tail -20 "$dir/b.log"; exit 1; }
ask b > "$out/pmc_slave.txt"
ask a > "$out/pmc_grandmaster.txt"
pmc -u -b 0 -s "$dir/ptp4l-b" 'GET TIME_STATUS_NP' 'GET PORT_DATA_SET' > "$out/pmc_slave_brief.txt"
pmc -u -b 0 -s "$dir/nothing-listens-here" "${cmds[@]}" > "$out/pmc_no_answer.txt"
for i in 1 2 3 4 5; do
  sleep 1
  ask b | awk '/master_offset|meanPathDelay/ {printf "%s=%s ", $1, $2} END {print ""}'
done
echo "--- slave log"; cat "$dir/b.log"
echo "--- grandmaster log"; cat "$dir/a.log"
