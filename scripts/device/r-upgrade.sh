#!/usr/bin/env bash
# `provision upgrade --to-env` on the GPU between two adopted copies of the image's torch venv: once as fast (the same
# venv: within noise or better, activated, exit 0), once made slower by a real setting (CUDA_LAUNCH_BLOCKING=1 in the
# new environment's [env], which the baseline runs with: every kernel launch waits for the kernel before the next one
# is issued; kept, exit 1, the old one still active). Both sides run the same [baseline], scripts/device/upgrade_bench.py
# (2000 bf16 GEMMs of 2048^2 timed by the wall clock, as a serving loop issues them). Copies are hard links (cp -al:
# seconds; nothing here writes into a venv), a full copy where /tmp is another file system.
#   Run: bash scripts/device/r-upgrade.sh        (about 2-3 minutes; no wheel beyond common.sh's)
EVIDENCE=r-upgrade
. scripts/device/common.sh
PROFILES=/tmp/upgrade-profiles; rm -rf "$PROFILES" /tmp/venv-a /tmp/venv-b; mkdir -p "$PROFILES"
export PROVISION_PROFILES=$PROFILES
profile() {  # NAME [ENV LINE]
  printf '%s\n' "schema = 1" "name = \"$1\"" 'cuda = "13.0"' '[packages]' 'torch = ">=2.9"' '[checks]' \
    'required = ["driver", "torch-cuda"]' '[env]' "${2:-}" '[baseline]' \
    "command = [\"python\", \"$PWD/scripts/device/upgrade_bench.py\"]" 'json_key = "launch_bound_tflops"' \
    'unit = "TFLOP/s"' 'better = "higher"' 'timeout = 300' > "$PROFILES/$1.toml"
}
profile img-a; profile img-b; profile img-b-slow 'CUDA_LAUNCH_BLOCKING = "1"'
step 01-copy bash -c "for c in a b; do cp -al $VENV /tmp/venv-\$c || { rm -rf /tmp/venv-\$c; cp -a $VENV /tmp/venv-\$c; }; done"
step 02-adopt-a $P adopt a /tmp/venv-a --profile img-a --no-lock
step 03-adopt-b $P adopt b /tmp/venv-b --profile img-b --no-lock
step 04-adopt-b-slow $P adopt b-slow /tmp/venv-b --profile img-b-slow --no-lock
step 05-switch-a $P switch a
step 06-upgrade-fast $P upgrade --to-env b --from a --runs 3 --json --markdown "$E/06-upgrade-fast.md"
step 07-envs-after-fast $P envs --json
step 08-switch-a $P switch a
step 09-upgrade-slow $P upgrade --to-env b-slow --from a --runs 3 --json --markdown "$E/09-upgrade-slow.md"
step 10-envs-after-slow $P envs
step 11-report-env $P report --env b-slow --profile img-a --json
echo; cat "$E/steps.txt"; echo
for s in 06-upgrade-fast 09-upgrade-slow; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d.get('baseline') or {}; print(sys.argv[1].split('/')[-1], d.get('decision'), '|', d.get('reason'), '|', [(x['step'], x['status'], x['seconds']) for x in d.get('steps', [])])" "$E/$s.out"
done
cat "$E/10-envs-after-slow.out"
