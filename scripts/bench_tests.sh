#!/usr/bin/env bash
# The README's test command (.ci/run) on a fresh clone, as CI runs it: wall time, and CPU time (user + sys of every
# process it started and waited for), with the load average before and after (the machine is shared).
#
#   scripts/bench_tests.sh [REV]    # REV of this repository, default HEAD; prints one line, the log stays in the folder
set -euo pipefail
rev=${1:-HEAD}
source=$(cd "$(dirname "$0")/.." && pwd)
folder=$(mktemp -d "${TMPDIR:-/tmp}/provision-bench-tests-XXXXXX")
git clone -q "$source" "$folder/clone"
git -C "$folder/clone" checkout -q "$(git -C "$source" rev-parse "$rev")"
cd "$folder/clone"
before=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
/usr/bin/time -o "$folder/time" -f "%e %U %S" env CI=true bash .ci/run > "$folder/log" 2>&1 < /dev/null || status=$?
after=$(cut -d' ' -f1-3 /proc/loadavg)
read -r wall user sys < <(tail -1 "$folder/time")  # time says "Command exited with non-zero status" first
summary=$(grep -E '^=+ .*(passed|failed).* =+$' "$folder/log" | tail -1 || true)
echo "$(git rev-parse --short HEAD): exit $status, wall ${wall} s, CPU $(echo "$user + $sys" | bc) s (user $user + sys $sys);" \
     "load $before -> $after; ${summary:-no pytest summary}; log $folder/log"
