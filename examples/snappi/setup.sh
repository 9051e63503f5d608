#!/usr/bin/env bash
# Makes the virtualenv the snappi examples run in (Debian's python3 refuses a plain
# `pip install`): examples/snappi/.venv, or the directory given as $1. Installs python3-venv
# from Debian when missing. Then: examples/snappi/.venv/bin/python examples/snappi/first_flow.py
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../../scripts/lib.sh"
venv="${1:-$here/.venv}"
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt python3-venv
stamp="$venv/.requirements"
if ! cmp -s "$here/requirements.txt" "$stamp" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$stamp"
fi
echo "snappi $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("snappi"))') is in $venv: run an example with $venv/bin/python $here/first_flow.py" >&2
