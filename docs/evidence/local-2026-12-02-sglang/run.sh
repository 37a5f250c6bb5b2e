#!/bin/bash
# The SGLang stack test whole, its create half opted in (PROVISION_TEST_STACK=1), in a worktree of main:
# profiles new, lock, report --lock, the forced lock judged, create + the imports check, the forced lock's conflict.
# RUN=NN names the files; COLD=1 empties the tests' cache of real wheels for the stack first (a new machine).
# --basetemp keeps the test's folders (its home's env.json holds the imports check's details) for this record.
cd "$(dirname "$0")/../../.."
E=docs/evidence/local-2026-12-02-sglang R=${RUN:-02}
rm -rf /tmp/mends/stack-basetemp
[ "${COLD:-0}" = 1 ] && rm -rf ~/.cache/provision-tests/sglang-stack
{ date -u; git log --oneline -1 | cut -c1-100; uptime; df -h /; du -sh ~/.cache/provision-tests/sglang-stack; } > $E/$R-before.txt 2>&1
PROVISION_TEST_STACK=1 /usr/bin/time -v timeout 2700 .venv/bin/python -m pytest tests/test_sglang_stack.py -n 0 -v \
    --basetemp /tmp/mends/stack-basetemp > $E/$R-output.log 2> $E/$R-time.txt
echo "rc $?" >> $E/$R-time.txt
{ date -u; uptime; df -h /; du -sh ~/.cache/provision-tests/sglang-stack /tmp/mends/stack-basetemp; } > $E/$R-after.txt 2>&1
