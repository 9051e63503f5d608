#!/usr/bin/env bash
# strobe's first-contact demo: builds strobe, generates precisely timed traffic, and shows
# how precise it is. Installs nothing beyond the Rust build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p strobe-cli
exec target/release/strobe demo "$@"
