#!/usr/bin/env bash
# The seventeenth stop's GPU path: `probe` on a real driver with provision's cache on a real full disk, then on a
# read-only one (a tmpfs in a mount namespace of its own, as tests/fulldisk.py makes it). The mark of an NVML reading
# under way (nvml/reading-PID) that the full disk let be made but not written must not be left behind: the next probe
# took it for a reading that crashed inside NVML. Each probe must read the driver and the GPU (NVML ok), none may
# leave a mark, and the second must not read NVML in a child first ("crashed" nowhere in its output).
#   Run: bash scripts/device/r-stop17.sh   (about 1 minute; wheels in .whl/: common.sh's)
EVIDENCE=r-stop17
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
cat > "$E/full-cache.sh" <<'SH'
# inside `unshare -rm`: a 1 MiB tmpfs as XDG_CACHE_HOME, filled, probed twice; then read-only, probed again
set -u
disk=/tmp/stop17-disk; mkdir -p "$disk"; mount -t tmpfs -o size=1m tmpfs "$disk" || exit 90
export XDG_CACHE_HOME=$disk/cache; mkdir -p "$XDG_CACHE_HOME/provision"
dd if=/dev/zero of="$disk/filler" bs=4k 2>/dev/null; df -k "$disk" | tail -1
for run in 1 2; do
  python3 -m provision probe --json > "$OUT_DIR/probe-full-$run.json" 2> "$OUT_DIR/probe-full-$run.err"; echo "full run $run: rc=$?"
  echo "marks left: $(ls "$XDG_CACHE_HOME/provision/nvml" 2>/dev/null | grep -c reading- || true)"
done
mount -o remount,ro "$disk"
python3 -m provision probe --json > "$OUT_DIR/probe-ro.json" 2> "$OUT_DIR/probe-ro.err"; echo "read-only run: rc=$?"
echo "marks left: $(ls "$XDG_CACHE_HOME/provision/nvml" 2>/dev/null | grep -c reading- || true)"
SH
mkdir -p "$E/out"
step 01-probe-full-cache env OUT_DIR="$E/out" unshare -rm bash "$E/full-cache.sh"
step 02-driver-states python3 - "$E/out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("probe-full-1", "probe-full-2", "probe-ro"):
    d = json.loads((out / f"{name}.json").read_text())
    err = (out / f"{name}.err").read_text()
    driver = d.get("driver") or {}
    print(name, "nvml:", driver.get("nvml"), "version:", driver.get("version"), "gpus:", len(d.get("gpus") or []),
          "| 'crashed' in output:", "crashed" in json.dumps(d) + err)
PY
