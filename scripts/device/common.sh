# Sourced by the evidence scripts: install what the GPU image lacks, and `step NAME CMD...`, which keeps each command's
# stdout, stderr, exit code and wall time under $E and re-packs $E into $OUT after every step (so that a call cut off
# by its time limit still returns what ran).
set -u
E=/tmp/${EVIDENCE:?set EVIDENCE to a folder name}; rm -rf "$E"; mkdir -p "$E"
export PYTHONUNBUFFERED=1 PROVISION_HOME=/tmp/provision-home
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/tomlkit-*.whl .whl/pyelftools-*.whl .whl/packaging-*.whl .whl/nvidia_ml_py-*.whl >/dev/null
export PYTHONPATH=/tmp/site:$PWD
VENV=/opt/torch/.venv
SITE=$VENV/lib/python3.12/site-packages
P="python3 -m provision"

step() {
  local name=$1; shift
  local start=$(date +%s.%N)
  "$@" > "$E/$name.out" 2> "$E/$name.err"
  local rc=$?
  printf '%-28s rc=%-3s %6ss  %s\n' "$name" "$rc" "$(python3 -c "print(round($(date +%s.%N) - $start, 2))")" "$*" | tee -a "$E/steps.txt"
  tar czf "$OUT/$EVIDENCE.tgz" -C /tmp "$EVIDENCE"
}

install_flashinfer() {
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl \
    .whl/cuda_tile-*.whl .whl/nvidia_cudnn_frontend-*.whl
}

# drivers STEP...: what each step's `probe --json` output says of the driver (its NVML state) and how many GPUs it read
drivers() {
  python3 - "$E" "$@" <<'PY'
import json, sys
e = sys.argv[1]
for name in sys.argv[2:]:
    try:
        d = json.load(open(f"{e}/{name}.out"))
        print(name, "driver:", json.dumps(d.get("driver"))[:600], "gpus:", len(d.get("gpus") or []))
    except Exception as exc:
        print(name, "unreadable:", exc)
PY
}
