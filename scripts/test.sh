#!/usr/bin/env bash
# Runs strobe's whole test suite: formatting, lints, a short fuzzing run, unit and integration
# tests.
# Installs what the tests need (tshark, the independent decoder) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_apt tshark tcpdump nftables iproute2 ethtool libcap2-bin util-linux procps
# The independent reader of HdrHistogram interval logs.
need_pip hdrh hdrhistogram
# The dashboard's chart library, embedded by the build.
need_web
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
(cd fuzz && cargo fmt -- --check)
# Every fuzz target for a few seconds (nightly + cargo-fuzz, installed when missing); the
# long campaign is `bash fuzz/run campaign`.
bash fuzz/run smoke "${FUZZ_SECONDS:-12}"
cargo test --workspace --quiet --no-fail-fast 2>&1 | tee /tmp/strobe-test.log
bash scripts/otg-tests.sh
bash scripts/gosnappi-tests.sh
