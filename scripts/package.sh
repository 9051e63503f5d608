#!/usr/bin/env bash
# Builds strobe's Debian package: target/debian/strobe_VERSION-1_ARCH.deb, holding the
# `strobe` binary, a man page per command, bash/zsh/fish completions and two systemd units
# (strobe.service, strobe-agent.service). Then: sudo dpkg -i target/debian/strobe_*.deb
#
#   bash scripts/package.sh             a release build (the slow part), then the package (~5 s)
#   bash scripts/package.sh --debug     packages the debug build instead (what CI tests; quick
#                                       when the tests built it already)
#
# Installs cargo-deb (a pinned version, from crates.io with `cargo install --locked`) when
# missing; needs no root. The man pages and completions come from the binary being packaged
# (`strobe generate-docs`, the same clap definition it parses with), written under
# target/PROFILE/strobe-docs; cargo-deb then packages what is built (`--no-build`).
# Prints the package's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0

profile=release
case "${1:-}" in
"") ;;
--debug) profile=dev ;;
-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "scripts/package.sh: unknown option '$1' (give --debug for the debug build, or nothing)" >&2; exit 2 ;;
esac
dir=$([ "$profile" = dev ] && echo debug || echo release)

if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
    echo "installing cargo-deb $CARGO_DEB_VERSION (cargo install --locked; about a minute)" >&2
    cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
fi
command -v dpkg-deb >/dev/null || {
    echo "scripts/package.sh: dpkg-deb is missing (Debian: apt-get install dpkg-dev)" >&2
    exit 1
}

target=${CARGO_TARGET_DIR:-target}
cargo build --quiet --locked -p strobe-cli --profile "$profile"
rm -rf "$target/$dir/strobe-docs"
"$target/$dir/strobe" generate-docs --out "$target/$dir/strobe-docs"
# Debian ships man pages compressed (cargo-deb compresses only files from outside target/).
gzip -9n "$target/$dir/strobe-docs"/man/*.1

# For the dev profile cargo-deb warns that it is meant for releases: the debug package exists
# for the tests, which need the same files, not a fast binary.
fast=(); [ "$profile" = dev ] && fast=(--fast)   # xz at its quickest: the debug binary is large
cargo deb --no-build --locked -p strobe-cli --profile "$profile" "${fast[@]}"
