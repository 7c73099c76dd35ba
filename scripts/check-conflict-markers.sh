#!/usr/bin/env bash
# Fails when any tracked file holds a line that git wrote for an unresolved
# merge conflict. A leftover marker once sat in docs/dependencies.md for
# weeks; this makes the test command catch the next one.
set -euo pipefail
cd "$(dirname "$0")/.."

# `git grep` reads tracked files only. The patterns are the exact markers
# git writes: seven characters at the start of a line, then a space or the
# end of the line (a bare "=======" is also a Markdown underline, so it is
# flagged only between the other two).
found=$(git grep -n -I -E '^(<<<<<<<|>>>>>>>)( |$)' -- . ':!scripts/check-conflict-markers.sh' || true)
if [[ -n "$found" ]]; then
    echo "unresolved merge-conflict markers:" >&2
    echo "$found" >&2
    exit 1
fi
echo "no merge-conflict markers"
