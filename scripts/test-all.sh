#!/usr/bin/env bash
# Runs every Heron test: formatting, lints, unit tests, end-to-end tests and
# the interoperability tests against NSD, Knot DNS, BIND, kdig and dig.
# Installs the Debian packages those tests need when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(nsd knot knot-dnsutils bind9 bind9-dnsutils)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The packaged daemons start themselves on install where systemd runs; the
# tests start their own instances on free loopback ports, so that is harmless.

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
