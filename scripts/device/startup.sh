#!/usr/bin/env bash
# Issue 23, item 5 on the GPU machine (one H200, about a minute): start-up of `switch`, `rollback`, `probe` and
# `probe --json` beside `python -c pass` and `python -c "import click"` (scripts/bench_startup.py, 15 runs each,
# interleaved; goals: switch/rollback <= 1.25x import click, probe <= 0.15 s), then what each loads and where probe's
# time goes (05: each part alone; 06: probe as the command runs it, NVML's start overlapped). The wheels come from .whl as common.sh installs them (with --no-compile, into /tmp/site);
# bench_startup.py compiles provision's and pynvml's bytecode first, as pip does at install time. Step 01 shows the
# same probe before that compile: whether this image lets Python write bytecode at all (PYTHONDONTWRITEBYTECODE).
#   Run: bash scripts/device/startup.sh
EVIDENCE=startup
. scripts/device/common.sh
step 00-python python3 -c 'import os, sys; print(sys.executable, sys.version.split()[0], "dont_write_bytecode", sys.flags.dont_write_bytecode); print({k: v for k, v in os.environ.items() if k.startswith("PYTHON")})'
step 01-importtime-probe-as-installed python3 -X importtime -m provision probe --json
step 02-bench-startup python3 scripts/bench_startup.py --runs 15 --json "$E/startup.json"
mkdir -p /tmp/startup-home && python3 -m venv --without-pip /tmp/startup-venv
$P adopt h /tmp/startup-venv --no-lock --home /tmp/startup-home >/dev/null 2>&1
step 03-importtime-switch python3 -X importtime -m provision switch h --home /tmp/startup-home
step 04-importtime-probe python3 -X importtime -m provision probe --json
step 05-probe-phases python3 - <<'EOF'
# where probe's time goes, in process: NVML's binding, its reading, the nvcc processes (on their thread), the rest
import time
t0 = time.perf_counter()
from provision.machine import host, nvml, pci, probe, toolkits  # noqa: E401
t1 = time.perf_counter(); lib = nvml.load_library()
ta = time.perf_counter(); lib.nvmlInit(); lib.nvmlShutdown()  # what probe's NVML thread overlaps with its imports
t2 = time.perf_counter(); reading = nvml.read(lib)
t3 = time.perf_counter(); host.read()
t4 = time.perf_counter(); pci.read(probe._files(False), [(g.index, g.pci_bus_id) for g in reading.gpus], None)
t5 = time.perf_counter(); found, notes = toolkits.find(())
t6 = time.perf_counter(); probe.probe(())
t7 = time.perf_counter()
for what, a, b in (("import machine modules", t0, t1), ("import pynvml", t1, ta), ("nvmlInit + nvmlShutdown alone", ta, t2),
                   ("nvml.read (nvmlInit...)", t2, t3),
                   ("host.read", t3, t4), ("pci.read", t4, t5), ("toolkits.find (nvcc x3 per toolkit)", t5, t6),
                   ("probe() again, whole", t6, t7)):
    print(f"{(b - a) * 1000:8.1f} ms  {what}")
print(len(found), "toolkit(s)", notes)
EOF
step 06-probe-overlap python3 - <<'EOF'
# probe as `provision probe` runs it, first in a fresh process: its threads started, the view imported meanwhile, then
# facts() (the imports of the readers, the wait for nvmlInit, the reading)
import time
t0 = time.perf_counter()
from provision.machine import probe
t1 = time.perf_counter(); running = probe.Probing(())
t2 = time.perf_counter(); from provision.views import machine as views  # noqa: E402
t3 = time.perf_counter(); facts = running.facts()
t4 = time.perf_counter(); views.probe(facts)
t5 = time.perf_counter()
for what, a, b in (("import probe", t0, t1), ("Probing() (threads started)", t1, t2), ("import the view", t2, t3),
                   ("facts() (imports, wait for NVML, reading)", t3, t4), ("the view built", t4, t5)):
    print(f"{(b - a) * 1000:8.1f} ms  {what}")
print(f"{(t5 - t0) * 1000:8.1f} ms  in all; {len(facts.gpus)} GPU(s), notes {list(facts.notes)}")
EOF
echo; cat "$E/steps.txt"; echo; cat "$E/00-python.out"; echo; cat "$E/02-bench-startup.out" "$E/02-bench-startup.err" | tail -12
echo; cat "$E/05-probe-phases.out" "$E/05-probe-phases.err" | tail -12
echo; cat "$E/06-probe-overlap.out" "$E/06-probe-overlap.err" | tail -8
echo; grep -E 'pynvml$|provision.machine.probe$|provision.cli.main$| site$' "$E/01-importtime-probe-as-installed.err" "$E/04-importtime-probe.err"
