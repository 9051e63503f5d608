#!/usr/bin/env bash
# strobe's first-contact demo: builds strobe, brings up the embedded virtual lab (network
# namespaces + veth around a Linux router), sends a throughput run and a mixed CBR + Poisson
# run through it, prints what came back, and removes the lab. Needs root for the lab: runs
# strobe under sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# Quiet, but not silent: the first release build takes minutes (about 4 on 2 cores).
if [ -x target/release/strobe ]; then
    echo "building strobe (release; only what changed)…" >&2
else
    echo "building strobe (release, first time: a few minutes on 2 cores)…" >&2
fi
cargo build --release --quiet -p strobe-cli
echo "built target/release/strobe; running strobe demo" >&2
if [ "$(id -u)" -eq 0 ]; then
    exec target/release/strobe demo "$@"
else
    exec sudo target/release/strobe demo "$@"
fi
