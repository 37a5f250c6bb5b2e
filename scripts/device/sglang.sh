#!/usr/bin/env bash
# Issue 20 on a GPU machine (nvidia-h200). No registry is reachable there, so the whole SGLang stack cannot be
# installed on it: that was done on a CPU machine (docs/evidence/local-2026-12-01-sglang/). Proven here:
#  1. the imports check's libcuda rule, with the driver (libcuda.so.1 loads: an import that needs it PASSes) and
#     without it: libcuda.so.1 is hidden from one process tree by bind-mounting /dev/null over it in a private mount
#     namespace (`unshare -rm`, or `unshare -m` as root): the loader cache names the driver's library, and
#     LD_LIBRARY_PATH can only add places, never take one away; the machine's own files are untouched. There the
#     libcuda import SKIPs with its reason and the other failure still FAILs.
#  2. a lock judged on the live machine from the lock alone (`report --lock --no-fetch`, its profile deleted): the
#     driver gate from the lock's own CUDA 13.0 against the live driver, then with fetching from a local index: the
#     torch wheel's cubins against the live SM90, and the conflict and cuda-mix gates FAIL for cuda-python 12.6 beside
#     cuda-bindings 13.
# Needs .whl (scripts/device/common.sh). Run from the repo root: bash scripts/device/sglang.sh
EVIDENCE=${EVIDENCE:-h200-sglang}
. scripts/device/common.sh
step 01-probe $P probe
step 02-imports-with-driver python3 scripts/device/sglang_parts.py imports $E/imports-with-driver.json
LIBCUDA=$(python3 -c "import os; print(os.path.realpath([l.split(' => ')[1] for l in os.popen('ldconfig -p').read().splitlines() if 'libcuda.so.1 ' in l][0]))")
echo "libcuda.so.1 -> $LIBCUDA" > $E/libcuda.txt
HIDE="mount --bind /dev/null $LIBCUDA && python3 scripts/device/sglang_parts.py imports $E/imports-without-driver.json"
if unshare -rm true 2>/dev/null; then
  step 03-imports-without-driver unshare -rm sh -c "$HIDE"
else
  step 03-imports-without-driver unshare -m sh -c "$HIDE"
fi
python3 scripts/device/sglang_parts.py lock $E/lock 300 > $E/index-url.txt 2> $E/index.err &
SERVER=$!
for i in $(seq 60); do [ -s $E/index-url.txt ] && break; sleep 1; done
step 04-lock-made cat $E/lock/lock.json $E/lock/lock.err
step 05-report-lock-no-fetch $P report --lock $E/lock/pylock.device.toml --no-fetch --json
step 06-report-lock-no-fetch-table $P report --lock $E/lock/pylock.device.toml --no-fetch
step 07-report-lock-fetched $P report --lock $E/lock/pylock.device.toml --json
step 08-report-lock-again $P report --lock $E/lock/pylock.device.toml --json
kill $SERVER 2>/dev/null
tar czf "$OUT/$EVIDENCE.tgz" -C /tmp "$EVIDENCE"
