#!/usr/bin/env bash
# Runs strobe's whole test suite: formatting, lints, a short fuzzing run, unit and integration
# tests.
# Installs what the tests need (tshark, the independent decoder) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# The tests leave the checkout as they found it (they write under target/ or a temp
# directory): what git says of the tree now is compared at the end.
tree_before="$(git status --porcelain 2>/dev/null || true)"
need_apt tshark tcpdump nftables iproute2 ethtool libcap2-bin util-linux procps linuxptp
# The lab's testpmd DUT (dpdk-testpmd) and its Open vSwitch DUT (ovs-vswitchd; under
# systemd the package also starts the system's own switch, which the lab never uses).
need_apt dpdk-dev openvswitch-switch
# A container engine from the start (tests/deploy builds and runs the agent's image), so that
# every test below runs on a host with it installed, as users' hosts may be.
need_apt systemd podman runc debootstrap
# The independent reader of HdrHistogram interval logs.
need_pip hdrh hdrhistogram
# The independent validator of --json documents against docs/schema/.
need_pip jsonschema jsonschema
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
(cd fuzz && cargo fmt -- --check)
# The fuzz crate has its own lock file: a dependency added to a workspace crate must be
# recorded there too, or the smoke run below rewrites it (and the tree check fails late).
if ! (cd fuzz && cargo metadata --locked --format-version 1 >/dev/null 2>&1); then
    echo "fuzz/Cargo.lock is out of date: run \`(cd fuzz && cargo metadata --format-version 1 >/dev/null)\` and commit it" >&2
    exit 1
fi
# Every fuzz target for a few seconds (nightly + cargo-fuzz, installed when missing); the
# long campaign is `bash fuzz/run campaign`.
bash fuzz/run smoke "${FUZZ_SECONDS:-12}"
mkdir -p target
cargo test --workspace --quiet --no-fail-fast 2>&1 | tee target/strobe-test.log
# The README's install step, as written but into a folder under target/ and as a debug build
# (which reuses the tests' build): it must give a `strobe` that runs.
rm -rf target/install-check
CARGO_TARGET_DIR="$PWD/target" cargo install --quiet --debug --locked --path crates/strobe-cli \
    --root target/install-check
target/install-check/bin/strobe --version >/dev/null
# Real runs' --json documents against the published JSON Schemas (docs/schema/).
python3 scripts/check-json-schema.py target/debug/strobe
bash scripts/otg-tests.sh
# deploy/: the agent's systemd unit and capabilities, and its container image built and run
# (podman with runc; the base image made by debootstrap, as no registry is reachable here).
STROBE_BIN="$PWD/target/debug/strobe" bash tests/deploy/run.sh
# The Debian package of the debug build (cargo-deb, installed when missing): dpkg -i here, man
# pages, completions, the units, a run as the unit's user; purged afterwards.
bash tests/package/run.sh
bash scripts/gosnappi-tests.sh
tree_after="$(git status --porcelain 2>/dev/null || true)"
if [ "$tree_before" != "$tree_after" ]; then
    echo "the tests changed the checkout (they must write only under target/ or a temp directory):" >&2
    diff <(echo "$tree_before") <(echo "$tree_after") >&2 || true
    exit 1
fi
