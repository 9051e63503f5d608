#!/usr/bin/env bash
# The OTG server's tests: `strobe serve` on a lab veth pair, driven by the unmodified snappi
# client (pinned in tests/otg/requirements.txt, installed into a virtualenv under target/).
# Needs root (the lab's namespaces). Called by scripts/test.sh; `--setup-only` only
# prepares the virtualenv (bench/run serve uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# promtool (in Debian's prometheus) lints the server's /metrics exposition; the dashboard
# is tested in Debian's chromium through its chromedriver.
need_apt tcpdump iproute2 python3-venv prometheus chromium chromium-driver
venv=target/otg-venv
stamp="$venv/.requirements"
if ! cmp -s tests/otg/requirements.txt "$stamp" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/otg/requirements.txt
    cp tests/otg/requirements.txt "$stamp"
fi
[ "${1:-}" = --setup-only ] && exit 0
cargo build --quiet -p strobe-cli
STROBE_BIN="$PWD/target/debug/strobe" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/otg "$@"
# Many hosts under one OTG endpoint: agents in host namespaces, a router between them, the
# controller in front (tshark decodes a remote capture; ptp4l runs between two hosts).
need_apt tshark openssl linuxptp util-linux
STROBE_BIN="$PWD/target/debug/strobe" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/multihost
