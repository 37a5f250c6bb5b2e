#!/usr/bin/env bash
# The fifteenth stop's scan of a wheel over worker processes, on a real GPU machine's real CUDA binaries, with every
# core it has: a wheel made here of torch's CUDA libraries (more than 64 MB of members: scanned over workers) scanned
# whole and its members compared with a scan of the same files on disk; the race that hung CI made certain (another
# thread inside provision.scan.search's import while the workers fork); the scan killed with SIGKILL, and interrupted
# (SIGINT to its process group, as Ctrl-C sends it), each mid-scan: no worker may outlive it.
#   Run: bash scripts/device/r-stop15.sh   (about 2 minutes; wheels in .whl/: common.sh's)
EVIDENCE=r-stop15
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0
LIBS=$SITE/torch/lib
WHEEL=/tmp/cudalibs-1.0-py3-none-manylinux_2_28_x86_64.whl
step 00-nvidia-smi nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv
step 01-cores python3 -c "import os; print(len(os.sched_getaffinity(0)), 'cores')"
step 02-make-wheel python3 - "$LIBS" "$WHEEL" <<'PY'
import os, sys, zipfile
libs, out = sys.argv[1], sys.argv[2]
names = sorted((f for f in os.listdir(libs) if ".so" in f), key=lambda f: -os.path.getsize(os.path.join(libs, f)))
chosen, total = [], 0
for name in names:  # the largest first, up to 1.5 GB in all
    size = os.path.getsize(os.path.join(libs, name))
    if total + size <= 1_500_000_000:
        chosen.append(name)
        total += size
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as wheel:
    for name in chosen:
        wheel.write(os.path.join(libs, name), f"cudalibs/{name}")
    wheel.writestr("cudalibs-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: cudalibs\nVersion: 1.0\n")
    wheel.writestr("cudalibs-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_28_x86_64\n")
    wheel.writestr("cudalibs-1.0.dist-info/RECORD", "")
print(len(chosen), "libraries,", total, "bytes:", ", ".join(chosen))
print(os.path.getsize(out), "bytes zipped")
PY
step 03-scan-wheel env XDG_CACHE_HOME=/tmp/stop15-a $P scan --json "$WHEEL"
step 04-scan-files bash -c "cd $LIBS && XDG_CACHE_HOME=/tmp/stop15-b $P scan --json \$(python3 -c \"import zipfile; print(' '.join(n.split('/')[1] for n in zipfile.ZipFile('$WHEEL').namelist() if n.startswith('cudalibs/')))\")"
step 05-same python3 - "$E" <<'PY'
import json, os, sys
e = sys.argv[1]
def codes(name):
    found = {}
    for f in json.load(open(f"{e}/{name}.out"))["files"]:
        key = os.path.basename(f["path"].split("!")[-1])
        found[key] = {k: f.get(k) for k in ("cubin", "ptx", "lto", "compressed_entries", "relocatable")}
    return found
wheel, files = codes("03-scan-wheel"), codes("04-scan-files")
print(len(wheel), "members with device code in the wheel;", len(files), "files on disk")
print("the same:", wheel == files)
for name in sorted(set(wheel) | set(files)):
    if wheel.get(name) != files.get(name):
        print("DIFFERS", name, wheel.get(name), files.get(name))
sys.exit(0 if wheel == files and wheel else 1)
PY
step 06-race python3 - "$WHEEL" <<'PY'
import importlib.abc, importlib.machinery, os, sys, threading, time
inside = threading.Event()
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "provision.scan.search":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader
        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)
            def exec_module(self, module):
                inside.set(); time.sleep(2); real.exec_module(module)
        spec.loader = Loader()
        return spec
sys.meta_path.insert(0, Slow())
from pathlib import Path
from provision.scan import wheels
threading.Thread(target=lambda: __import__("provision.scan.search"), daemon=True).start()
assert inside.wait(10)
started = time.monotonic()
found = [(n, dict(c.loadable.cubin) if c else w) for n, c, w in wheels.scan_wheel(Path(sys.argv[1]), jobs=len(os.sched_getaffinity(0)))]
print(len(found), "members scanned over", len(os.sched_getaffinity(0)), "workers in", round(time.monotonic() - started, 1), "s, another thread inside search's import as they forked")
print(sum(1 for _, c in found if c), "with cubins")
PY
cat > "$E/scan.py" <<'PY'
# `provision scan --json WHEEL` with Ctrl-C's default (a background job of a script starts with SIGINT ignored)
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = ["provision", "scan", "--json", sys.argv[2]]
runpy.run_module("provision", run_name="__main__", alter_sys=True)
PY
cat > "$E/killed.sh" <<'SH'
# $1: the signal; the scan in a session of its own, signalled once its workers run, then its survivors counted
# (the workers are forks of the scan: the same command line)
scan="$(dirname "$0")/scan.py"
XDG_CACHE_HOME=/tmp/stop15-$1 setsid python3 "$scan" "$1" "$2" > /dev/null 2>&1 &
leader=$!
for i in $(seq 1 200); do
  [ "$(pgrep -f "$scan $1" | wc -l)" -gt 2 ] && break
  sleep 0.05
done
echo "workers before: $(pgrep -f "$scan $1" | grep -vc "^$leader\$")"
if [ "$1" = KILL ]; then kill -KILL "$leader"; else kill -INT -- "-$leader"; fi
for i in $(seq 1 20); do
  sleep 0.5
  left=$(pgrep -f "$scan $1" | wc -l)
  [ "$left" = 0 ] && break
done
echo "left running $(python3 -c "print(0.5 * $i)") s after SIG$1: $left"
wait "$leader" 2>/dev/null; echo "scan's exit: $?"
[ "$left" = 0 ]
SH
step 07-kill-9 bash "$E/killed.sh" KILL "$WHEEL"
step 08-ctrl-c bash "$E/killed.sh" INT "$WHEEL"
echo; cat "$E/steps.txt"; echo
cat "$E/02-make-wheel.out" | cut -c1-400; cat "$E/05-same.out" | head -20; cat "$E/06-race.out" "$E/06-race.err" | tail -5
cat "$E/07-kill-9.out" "$E/08-ctrl-c.out"
