#!/usr/bin/env bash
# Signs crates/heron-zone/tests/data/signed/proofs.test.zone into the
# fixtures beside it: NSEC, NSEC3 (salt, iterations) and NSEC3 opt-out.
# The heron-zone tests read them for which records prove what, not for
# their signatures, so expired signatures do not matter; run this again
# when the source zone changes. Needs dnssec-keygen and dnssec-signzone
# (Debian: bind9-utils).
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/crates/heron-zone/tests/data/signed"
keys="$(mktemp -d)"
trap 'rm -rf "$keys"' EXIT
cd "$keys"
dnssec-keygen -q -a ECDSAP256SHA256 -n ZONE proofs.test >/dev/null
dnssec-keygen -q -a ECDSAP256SHA256 -f KSK -n ZONE proofs.test >/dev/null
sign() {
    local out="$1"
    shift
    dnssec-signzone -q -S -K . "$@" -o proofs.test -f "$dir/$out" "$dir/proofs.test.zone" >/dev/null
}
sign proofs.test.nsec.zone
sign proofs.test.nsec3.zone -3 aabbccdd -H 5
sign proofs.test.optout.zone -3 - -H 0 -A
