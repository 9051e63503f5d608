#!/usr/bin/env bash
# Replaces the vendored uPlot (web/vendor/uplot) with the npm registry's VERSION: a
# maintainer's step, not a build step (strobe builds without npm). npm checks the package
# against the registry's integrity hash; the new hashes are printed for the README there.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
version="${1:?usage: scripts/update-uplot.sh VERSION (e.g. 1.6.32)}"
command -v npm >/dev/null 2>&1 || need_apt npm
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$version" >/dev/null && tar -xzf uplot-*.tgz)
for file in dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE; do
    cp "$work/package/$file" web/vendor/uplot/
done
grep -q "(v$version)" web/vendor/uplot/uPlot.iife.min.js \
    || { echo "the fetched script does not name version $version" >&2; exit 1; }
(cd web/vendor/uplot && sha256sum uPlot.iife.min.js uPlot.min.css LICENSE)
echo "now update web/vendor/uplot/README.md (version, hashes) and UPLOT_VERSION in the tests of crates/strobe-serve/src/web.rs" >&2
