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
gpu_apps() { nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader; }
step 01-adopt $P adopt gpu $VENV --no-lock
# try then needs no baseline first: the stop lands in its runs, the trial's file in the venv (a watcher says so)
step 02-baseline $P baseline gpu --runs 3 --json
watch_marker() { for i in $(seq 60); do test -e $MARKER && { echo "$1: marker seen in the venv during the trial"; return; }; sleep 0.5; done; echo "$1: marker never seen"; }
watch_marker sigterm > "$E/03-watch.txt" &
step 03-try-sigterm timeout --preserve-status -s TERM 20 $P try gpu stopped --file provision_trial_marker.py=/tmp/trial_marker_source.py --runs 3
step 04-after-sigterm bash -c "echo marker in venv: \$(test -e $MARKER && echo yes || echo no); echo gpu apps: \$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
watch_marker background > "$E/05-watch.txt" &
step 05-try-background sh -c "$P try gpu background --file provision_trial_marker.py=/tmp/trial_marker_source.py --runs 3 & pid=\$!; sleep 20; kill \$pid; wait \$pid; echo rc=\$?"
step 06-after-background bash -c "echo marker in venv: \$(test -e $MARKER && echo yes || echo no); echo gpu apps: \$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
step 07-trials $P trials gpu --json
step 08-drift $P check gpu --only drift --json
echo; cat "$E/steps.txt"; echo
wait; cat "$E/03-watch.txt" "$E/05-watch.txt"
tail -n 4 "$E/03-try-sigterm.err"; cat "$E/04-after-sigterm.out"; cat "$E/05-try-background.out"; tail -n 4 "$E/05-try-background.err"
cat "$E/06-after-background.out"; head -c 800 "$E/07-trials.out"; echo; head -c 800 "$E/08-drift.out"; echo
