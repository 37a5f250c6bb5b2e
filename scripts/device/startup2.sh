#!/usr/bin/env bash
# Issue 23, items 5 and 6, on the one-H200 machine, with provision in a venv of its OWN, as a user installs it
# (README: python3 -m venv .venv && pip install): the earlier figures (h200-2026-12-02-startup-b/, -scan/) ran it
# inside the image's torch venv, whose site-packages holds numba-cuda's `_numba_cuda_redirector` .pth, run by `site` in
# every process there (34 ms of 48 ms of `site` in 04-importtime-probe.err). Here /tmp/pv is `venv --without-pip` of
# the image's base Python (/usr) with one .pth listing /tmp/site (common.sh's wheels), this checkout and the torch
# venv's site-packages as plain paths: site.addpackage only appends such lines to sys.path (addsitedir, which runs a
# folder's .pth files, is called for the venv's own site-packages alone; step 01 prints this Python's addpackage and
# whether the redirector was loaded), so click, rich and requests come from the image and no numba .pth runs.
# /tmp/pv/bin/provision is the console script pip writes. About 2 minutes: 15 runs of every row, interleaved
# (scripts/bench_startup.py), bytecode compiled first (the image sets PYTHONDONTWRITEBYTECODE; pip compiles at install).
# Step 08: what `switch` imports there (it paid 1.35x `import click` in the first run: pathlib, json, the envs modules).
# Step 07: what probe --json read (the driver started through ctypes before pynvml's import must still give every GPU).
# Goals: `provision probe --json` <= 0.15 s; `provision scan --json FILE` <= 0.1 s for libcublasLt.so.13,
# libtorch_cuda, libtorch_cpu, libtriton, xla_cuda_plugin (whole processes).
#   Run: bash scripts/device/startup2.sh        (from the repository root; `.whl` carried, as for house.sh)
EVIDENCE=startup2
. scripts/device/common.sh
TORCHPY=$VENV/bin/python3
python3 -m venv --without-pip /tmp/pv
PV=/tmp/pv/bin/python
printf '%s\n' /tmp/site "$PWD" "$SITE" > "$($PV -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/provision-paths.pth"
cat > /tmp/pv/bin/provision <<EOF
#!$PV
# -*- coding: utf-8 -*-
import re
import sys
from provision.cli.main import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?\$', '', sys.argv[0])
    sys.exit(main())
EOF
chmod +x /tmp/pv/bin/provision
# what pip does at install time: common.sh installed with --no-compile; the image's packages get theirs where missing
python3 -m compileall -q /tmp/site $SITE/click $SITE/rich $SITE/requests $SITE/urllib3 $SITE/markdown_it $SITE/pygments >/dev/null
unset PYTHONPATH  # from here on the own venv finds everything through its .pth; the torch venv's rows get it back
TORCHPATH=/tmp/site:$PWD
FOUND=$(find $SITE -type f \( -name libcublasLt.so.13 -o -name libtorch_cuda.so -o -name libtorch_cpu.so \
        -o -name libtriton.so -o -name xla_cuda_plugin.so \) | sort)
SCANS=$(echo "$FOUND" | awk -F/ '!seen[$NF]++ {print "--scan " $0}')
CUBLASLT=$(echo "$FOUND" | grep libcublasLt | head -1)
cat > /tmp/pv-check.py <<'EOF'
import os, sys, sysconfig
print(sys.executable, sys.version.split()[0], "prefix", sys.prefix, "base", sys.base_prefix,
      "dont_write_bytecode", sys.flags.dont_write_bytecode)
print("sys.path", sys.path)
print("numba redirector loaded:", "_numba_cuda_redirector" in sys.modules, "| modules .pth files loaded:",
      sorted(m for m in sys.modules if m.startswith(("_virtualenv", "_distutils_hack", "_numba", "certifi"))))
source = open(os.path.join(sysconfig.get_path("stdlib"), "site.py")).read()  # site itself is frozen: no getsource
start = source.index("def addpackage(")
print(source[start:source.index("\ndef ", start + 1)])
EOF
step 01-interpreters bash -c "cat /tmp/pv/pyvenv.cfg; $PV /tmp/pv-check.py; $TORCHPY /tmp/pv-check.py; echo '$FOUND'"
step 02-importtime-pass bash -c "$PV -X importtime -c pass 2>&1 | grep -E ' site\$|numba'; echo ==; $TORCHPY -X importtime -c pass 2>&1 | grep -E ' site\$|numba'"
step 03-bench $PV scripts/bench_startup.py --runs 15 $SCANS --scan /bin/true --python $TORCHPY --python-path $TORCHPATH --json "$E/startup2.json"
step 04-importtime-probe $PV -X importtime /tmp/pv/bin/provision probe --json
step 05-importtime-scan $PV -X importtime /tmp/pv/bin/provision scan --json $CUBLASLT
step 06-probe-phases $PV - <<'EOF'
# probe as `provision probe` runs it, in a fresh process of the own venv (what startup.sh's step 06 read in the image's)
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
print(f"{(t5 - t0) * 1000:8.1f} ms  in all; {len(facts.gpus)} GPU(s)")
EOF
step 07-probe-answer bash -c "/tmp/pv/bin/provision probe --json | $PV -c 'import json, sys; d = json.load(sys.stdin); print(d[\"driver\"][\"version\"], [g[\"name\"] for g in d[\"gpus\"]], d[\"notes\"])'"
$PV -m venv --without-pip /tmp/s2-venv && /tmp/pv/bin/provision adopt h /tmp/s2-venv --no-lock --home /tmp/s2-home >/dev/null 2>&1
step 08-importtime-switch $PV -X importtime /tmp/pv/bin/provision switch h --home /tmp/s2-home
echo; cat "$E/steps.txt"; echo; grep -E 'numba|prefix' "$E/01-interpreters.out"; cat "$E/02-importtime-pass.out"
echo; cat "$E/03-bench.out" "$E/03-bench.err" | tail -24
echo; cat "$E/06-probe-phases.out" "$E/06-probe-phases.err" "$E/07-probe-answer.out" "$E/07-probe-answer.err" | tail -10
for f in 04-importtime-probe 05-importtime-scan 08-importtime-switch; do echo "== $f"; sort -t'|' -k2 -n "$E/$f.err" | tail -14; done
