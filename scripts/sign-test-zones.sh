#!/usr/bin/env bash
# Signs the test zones into checked-in fixtures, once; run it again when a
# source zone changes (the tests check that each fixture was signed from
# the source as it is now, by its SHA-256 on the fixture's first line).
#
# * crates/heron-zone/tests/data/signed/proofs.test.zone: the heron-zone
#   unit tests read which records prove what.
# * crates/heron/tests/data/differential/edge.test.zone: the differential
#   test (Heron, NSD, Knot, BIND) and the delv validation test serve it.
#
# Each is signed three ways: NSEC, NSEC3 (salt aabbccdd, 5 iterations)
# and NSEC3 opt-out (no salt, 0 iterations), one record per line, with
# fresh ECDSA P-256 keys (a KSK and a ZSK) and signatures valid from
# 2026-01-01 to 2040-01-01, so that the tests do not depend on the date.
# The keys are thrown away: the KSK's DNSKEY in the signed zone is the
# trust anchor. Needs dnssec-keygen and dnssec-signzone (Debian:
# bind9-utils).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
keys="$(mktemp -d)"
trap 'rm -rf "$keys"' EXIT

sign_all() {
    local origin="$1" source="$2" outdir="$3"
    local sum
    sum="$(sha256sum "$source" | cut -d' ' -f1)"
    (
        cd "$keys"
        rm -f K*
        dnssec-keygen -q -a ECDSAP256SHA256 -n ZONE "$origin" >/dev/null
        dnssec-keygen -q -a ECDSAP256SHA256 -f KSK -n ZONE "$origin" >/dev/null
    )
    sign() {
        local out="$outdir/$1"
        shift
        (cd "$keys" && dnssec-signzone -q -S -K . -O full \
            -s 20260101000000 -e 20400101000000 "$@" \
            -o "$origin" -f "$out.tmp" "$source" >/dev/null)
        { echo "; source sha256 $sum"; cat "$out.tmp"; } >"$out"
        rm -f "$out.tmp"
    }
    sign "$origin.nsec.zone"
    sign "$origin.nsec3.zone" -3 aabbccdd -H 5
    sign "$origin.optout.zone" -3 - -H 0 -A
}

sign_all proofs.test "$root/crates/heron-zone/tests/data/signed/proofs.test.zone" \
    "$root/crates/heron-zone/tests/data/signed"
mkdir -p "$root/crates/heron/tests/data/differential/signed"
sign_all edge.test "$root/crates/heron/tests/data/differential/edge.test.zone" \
    "$root/crates/heron/tests/data/differential/signed"
