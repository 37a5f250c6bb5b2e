#!/usr/bin/env bash
# The eighteenth stop's GPU path: `provision try` stopped by SIGTERM while its workload (the built-in bf16 GEMM
# baseline) runs on the GPU, as `timeout` or systemd stop it: the workload ends, the trial's file goes back out of the
# venv first, exit 130, no row in the ledger, no process left on the GPU. Then the same as a script's background job
# (SIGINT ignored, as POSIX starts it: the stop was lost before the review's fix). The rank checks (payloads/_common.py
# now times a step on the monotonic clock) and the JSON of every command run in r-stop14.sh.
#   Run: bash scripts/device/r-stop18.sh     (about 2 minutes; no wheels beyond common.sh's)
EVIDENCE=r-stop18
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf "$PROVISION_HOME"
echo "print('a trial file')" > /tmp/trial_marker_source.py
MARKER=$SITE/provision_trial_marker.py
step 01-adopt $P adopt gpu $VENV --no-lock
# try then needs no baseline first: the stop is sent 2 s after the trial's file appears in the venv (its runs under way)
step 02-baseline $P baseline gpu --runs 6 --json
cat > "$E/stop.py" <<'PY'
# start `try` (SIGINT as it is given: default, or ignored as a script's background job), SIGTERM it 2 s into its runs
import os, signal, subprocess, sys, time
marker, ignore_int, argv = sys.argv[1], sys.argv[2] == "ignored", sys.argv[3:]
child = subprocess.Popen(argv, preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_int else None)
deadline = time.time() + 120
while time.time() < deadline and not os.path.exists(marker) and child.poll() is None:
    time.sleep(0.1)
print("marker seen in the venv during the trial:", os.path.exists(marker), flush=True)
time.sleep(2)
child.send_signal(signal.SIGTERM)
print("try exit code:", child.wait(), flush=True)
PY
step 03-try-sigterm python3 "$E/stop.py" $MARKER default $P try gpu stopped --file provision_trial_marker.py=/tmp/trial_marker_source.py --runs 6
step 04-after-sigterm bash -c "echo marker in venv: \$(test -e $MARKER && echo yes || echo no); echo gpu apps: \$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
step 05-try-background python3 "$E/stop.py" $MARKER ignored $P try gpu background --file provision_trial_marker.py=/tmp/trial_marker_source.py --runs 6
step 06-after-background bash -c "echo marker in venv: \$(test -e $MARKER && echo yes || echo no); echo gpu apps: \$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
step 07-trials $P trials gpu --json
step 08-drift $P check gpu --only drift --json
echo; cat "$E/steps.txt"; echo
cat "$E/03-try-sigterm.out"; tail -n 4 "$E/03-try-sigterm.err"; cat "$E/04-after-sigterm.out"; cat "$E/05-try-background.out"; tail -n 4 "$E/05-try-background.err"
cat "$E/06-after-background.out"; head -c 800 "$E/07-trials.out"; echo; head -c 800 "$E/08-drift.out"; echo
