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
