#!/usr/bin/env bash
# Issue 23 on the GPU machine (quiet, one H200): start-up of `provision --version`, `switch`, `rollback` and
# `probe --json` beside `python -c "import click"` (scripts/bench_startup.py: goals 1.25x for switch/rollback, 0.15 s
# for probe), the modules each imports, and whole-process `scan --json FILE` of the largest libraries (libcublasLt
# included) beside cuobjdump, wheels in place beside `unzip -p` (scripts/bench_scan.py: goals 0.1 s, 1.0x).
#   Run: bash scripts/device/house.sh
EVIDENCE=house
. scripts/device/common.sh
step 01-startup python3 scripts/bench_startup.py --runs 21 --json "$E/startup.json"
mkdir -p /tmp/house-home && python3 -m venv --without-pip /tmp/house-venv
$P adopt h /tmp/house-venv --no-lock --home /tmp/house-home >/dev/null 2>&1
step 02-importtime-switch python3 -X importtime -m provision switch h --home /tmp/house-home
step 03-importtime-probe python3 -X importtime -m provision probe --json
LARGEST=$(find $SITE -name '*.so*' -type f -printf '%s %p\n' | sort -rn | head -5 | cut -d' ' -f2)
CUBLASLT=$(ls $SITE/nvidia/cu13/lib/libcublasLt.so* $SITE/nvidia/cublas/lib/libcublasLt.so* 2>/dev/null | head -1)
WHEELS=$(find .whl -name '*.whl' -size +20M 2>/dev/null | head -3 | sed 's/^/--wheel /')
step 04-bench-scan python3 scripts/bench_scan.py --runs 9 $LARGEST $CUBLASLT $WHEELS --json "$E/bench-scan.json"
echo; cat "$E/steps.txt"; echo; cat "$E/01-startup.out" "$E/01-startup.err" | tail -12
echo; cat "$E/04-bench-scan.out" "$E/04-bench-scan.err" | tail -30
