#!/usr/bin/env bash
# Issue 36, item 1, on the GPU machine: NVML made to fail for real, then the real driver. A libnvidia-ml.so.1 first on
# LD_LIBRARY_PATH: the tests' stand-in compiled here with cc (nvmlInit* return one NVML error code: 18 is
# NVML_ERROR_LIB_RM_VERSION_MISMATCH, 4 NO_PERMISSION, 9 DRIVER_NOT_LOADED), a real library of the wrong kind (libz
# renamed: no nvmlInitWithFlags) and a file that is no library at all. probe names each kind with what to do; check's
# GPU checks are ERROR; create of a tiny profile (one wheel from an index on 127.0.0.1) is not made active; report's
# driver gate FAILs; a recording of the mismatch replays as it read. With the real driver: ok, checks pass, create
# activates.
#   Run: bash scripts/device/r-nvml.sh   (needs .whl/uv-*.whl for create: manylinux x86_64; cc for the stand-in)
EVIDENCE=r-nvml
. scripts/device/common.sh
ls .whl/uv-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/uv-*.whl
rm -rf /tmp/nvml "$PROVISION_HOME"; mkdir -p /tmp/nvml/profiles /tmp/nvml/standin /tmp/nvml/wrong /tmp/nvml/junk
python3 scripts/device/nvml_index.py /tmp/nvml/index > /tmp/nvml/url & INDEX=$!
CC=$(command -v cc || command -v gcc || true)
[ -n "$CC" ] && python3 -c "import sys; sys.path.insert(0, 'tests'); import standin_nvml; from pathlib import Path; standin_nvml.build(Path('/tmp/nvml/standin'))"
for lib in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/lib64/libz.so.1; do
  [ -e $lib ] && cp -L $lib /tmp/nvml/wrong/libnvidia-ml.so.1 && break
done
echo "not a library" > /tmp/nvml/junk/libnvidia-ml.so.1
printf 'schema = 1\nname = "tiny"\ncuda = "13.0"\n[packages]\nalpha = "==1.0"\n[checks]\nrequired = ["imports"]\n' > /tmp/nvml/profiles/tiny.toml
sleep 1; export PROVISION_PROFILES=/tmp/nvml/profiles PROVISION_INDEX_DEFAULT=$(cat /tmp/nvml/url) PROVISION_NVML_START_TIMEOUT=20
PY=$(command -v python3)
MM="env LD_LIBRARY_PATH=/tmp/nvml/standin/lib STANDIN_NVML_INIT=18"
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version --format=csv
step 01-tools bash -c "echo cc=$CC; python3 -c 'import uv; print(uv.find_uv_bin())'; cat /proc/driver/nvidia/version"
step 02-real-probe-json $P probe --json
step 03-real-adopt $P adopt h200 $VENV --no-lock
step 04-real-check $P check h200 --only driver,torch-cuda
step 05-real-create-json $P create tiny --python $PY --json
step 06-real-report $P report --profile profiles/cu130.toml
step 10-mismatch-probe $MM $P probe
step 11-mismatch-probe-json $MM $P probe --json
step 12-mismatch-record $MM $P probe --record-nvml /tmp/nvml/mismatch.nvml.json
step 13-mismatch-replay-json env PROVISION_NVML_REPLAY=/tmp/nvml/mismatch.nvml.json $P probe --json
step 14-mismatch-check-json $MM $P check h200 --only driver,torch-cuda --json
step 15-mismatch-check $MM $P check h200
step 16-mismatch-create-json $MM $P create tiny --name tiny-mm --python $PY --json
step 17-mismatch-report $MM $P report --profile profiles/cu130.toml
step 18-mismatch-baseline $MM $P baseline h200
step 20-no-permission-json env LD_LIBRARY_PATH=/tmp/nvml/standin/lib STANDIN_NVML_INIT=4 $P probe --json
step 21-not-loaded-json env LD_LIBRARY_PATH=/tmp/nvml/standin/lib STANDIN_NVML_INIT=9 $P probe --json
step 22-wrong-library-json env LD_LIBRARY_PATH=/tmp/nvml/wrong $P probe --json
step 23-wrong-library-check env LD_LIBRARY_PATH=/tmp/nvml/wrong $P check h200 --only driver,torch-cuda
step 24-junk-library-json env LD_LIBRARY_PATH=/tmp/nvml/junk $P probe --json
step 30-envs-json $P envs --json
kill $INDEX
echo; cat "$E/steps.txt"; echo
for f in 02-real-probe-json 11-mismatch-probe-json 13-mismatch-replay-json 20-no-permission-json 21-not-loaded-json 22-wrong-library-json 24-junk-library-json; do
  echo "== $f"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['driver'], len(d['gpus']), 'GPUs')" "$E/$f.out" 2>&1 | head -c 1200
done
for f in 04-real-check 06-real-report 10-mismatch-probe 15-mismatch-check 17-mismatch-report 23-wrong-library-check; do
  echo "== $f"; head -c 2500 "$E/$f.out"; head -c 600 "$E/$f.err"
done
for f in 05-real-create-json 16-mismatch-create-json; do
  echo "== $f"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get('activated'), d.get('passed'), [(c['id'], c['status']) for c in d.get('checks', [])])" "$E/$f.out" 2>&1; tail -c 400 "$E/$f.err"
done
echo "== 18-mismatch-baseline"; cat "$E/18-mismatch-baseline.err"; echo "== 30-envs"; head -c 800 "$E/30-envs-json.out"
