#!/usr/bin/env bash
# strobe serve driven by gosnappi, the Go OTG client, unmodified (pinned in
# tests/gosnappi/go.mod): a lab of its own, the server on a free loopback port, the checks in
# tests/gosnappi/main.go. Needs root (the lab) and Go 1.25 or later (gosnappi's own
# minimum; Debian bookworm's golang is older): without one, it says so and skips.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_apt curl iproute2
if ! command -v go >/dev/null || ! go env GOVERSION | grep -qE '^go1\.(2[5-9]|[3-9][0-9])'; then
    echo "gosnappi tests skipped: they need Go 1.25 or later (gosnappi's minimum) on PATH" >&2
    exit 0
fi
cargo build --quiet -p strobe-cli
strobe="$PWD/target/debug/strobe"
(cd tests/gosnappi && go build -o "$OLDPWD/target/gosnappi-check" .)
prefix="gsn$(( $$ % 100000 ))"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    "$strobe" lab down --prefix "$prefix" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$strobe" lab up --prefix "$prefix" --dut cable >/dev/null
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
grpc_port=$(free_port)
# OTG over HTTP and over gRPC from one server: the checks run through both transports.
"$strobe" serve --listen "127.0.0.1:$port" --grpc-listen "127.0.0.1:$grpc_port" --lab "$prefix" >"target/gosnappi-serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/capabilities/version" >/dev/null 2>&1 && break
    sleep 0.1
done
target/gosnappi-check "http://127.0.0.1:$port" "127.0.0.1:$grpc_port"
