#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed
# yet (apt-get, with sudo when not root). Used by the test and benchmark
# scripts so they run on a fresh machine.
#
# The reference servers (nsd, knot, bind9) are wanted as programs the
# tests start on their own ports, not as system services: while this
# installs, a policy-rc.d (unless the machine has one) keeps their
# services from starting, and on a systemd machine the units of the
# packages installed here are then disabled, so no named or knotd is left
# answering on port 53 after a test run.
set -euo pipefail
missing=()
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "installing: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# made by heron scripts/ensure-packages.sh while it installs\nexit 101\n' |
        "${sudo_cmd[@]}" tee "$policy" >/dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    for p in "${missing[@]}"; do
        for unit in $(dpkg-query -L "$p" 2>/dev/null | grep -E '/systemd/system/[^/]+\.service$' || true); do
            name=$(basename "$unit")
            case "$name" in *@.service) continue ;; esac
            "${sudo_cmd[@]}" systemctl disable --now "$name" >/dev/null 2>&1 || true
            echo "ensure-packages: $name (from $p) disabled: the tests start their own servers"
        done
    done
fi
