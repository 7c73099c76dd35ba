#!/usr/bin/env bash
# Runs every Heron test: formatting, lints, unit tests, end-to-end tests and
# the interoperability tests against NSD, Knot DNS, BIND, kdig and dig.
# Installs the Debian packages those tests need when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-packages.sh make nsd knot knot-dnsutils bind9 bind9-dnsutils bind9-utils ldnsutils systemd man-db groff-base iproute2 prometheus python3 fish lintian dpkg-dev binutils fakeroot
# The packaged daemons start themselves on install where systemd runs; the
# tests start their own instances on free loopback ports, so that is harmless.

scripts/check-conflict-markers.sh
scripts/check-layers.sh
python3 scripts/check-function-length.py crates/heron/src
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
# The Debian package: built from the release binary, checked with lintian,
# installed, upgraded, removed and purged in a scratch root.
scripts/test-deb.sh
