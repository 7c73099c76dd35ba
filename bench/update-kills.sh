#!/usr/bin/env bash
# kill -9 durability of dynamic update (issue 39): HERON_KILLS random
# SIGKILLs (1,000 by default) of a Heron taking TSIG-signed UPDATEs from
# several clients at once, each kill after a random 0-300 ms, each
# restart checked: every update answered NOERROR served, none half
# applied (two-name updates: both names or neither), nothing unsent
# served, zone file and journal loaded cleanly. The test is
# crates/heron/tests/update_kills.rs (kill_campaign); it prints the seed
# and the totals. Bounded by HERON_KILLS_SECONDS (3600 by default).
#
#   bench/update-kills.sh                     # unsigned zone, 1,000 kills
#   HERON_KILLS_SIGNED=1 bench/update-kills.sh  # zone signed (NSEC3)
#   HERON_KILLS=50 HERON_KILLS_SEED=42 bench/update-kills.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export HERON_KILLS=${HERON_KILLS:-1000}
export HERON_KILLS_SECONDS=${HERON_KILLS_SECONDS:-3600}
exec cargo test -p heron --test update_kills -- --ignored --exact kill_campaign --nocapture
