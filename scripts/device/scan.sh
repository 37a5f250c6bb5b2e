#!/usr/bin/env bash
# Issue 23, item 6, on the one-H200 machine (quiet): whole-process `provision scan --json FILE` of the five largest
# libraries of the image's venv and libcublasLt (goal 0.1 s), each beside cuobjdump (counts must match) and beside the
# floor of the same run (`python -c pass`, `import click`, `scan --json /bin/true`), with the scan in process on one
# core and on every core (the data sections' parallel search); what `scan` imports (-X importtime); then a wheel in
# place beside `unzip -p` of the same members, in turns, wall and CPU (goal 1.0x): the wheel is made here from
# torch/lib (deflate, level 6), since no registry is reachable. bench_scan.py compiles provision's bytecode first (the
# image sets PYTHONDONTWRITEBYTECODE: the house run's 0.13-0.23 s included compiling every module on every run).
#   Run: bash scripts/device/scan.sh        (from the repository root; `.whl` carried, as for house.sh)
EVIDENCE=scan
. scripts/device/common.sh
LARGEST=$(find $SITE -name '*.so*' -type f -printf '%s %p\n' | sort -rn | head -5 | cut -d' ' -f2)
CUBLASLT=$(ls $SITE/nvidia/cu13/lib/libcublasLt.so* $SITE/nvidia/cublas/lib/libcublasLt.so* 2>/dev/null | head -1)
step 01-bench-files python3 scripts/bench_scan.py --runs 11 $LARGEST $CUBLASLT --json "$E/bench-files.json"
step 02-importtime python3 -X importtime -m provision scan --json $CUBLASLT
WHEEL=/tmp/torch_lib-1.0-py3-none-linux_x86_64.whl
step 03-make-wheel python3 -c "
import os, sys, zipfile
root = sys.argv[1]
with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED, compresslevel=6) as wheel:
    for name in sorted(os.listdir(root)):
        if os.path.isfile(os.path.join(root, name)) and not os.path.islink(os.path.join(root, name)):
            wheel.write(os.path.join(root, name), 'torch_lib/' + name)
print(os.path.getsize(sys.argv[2]))" $SITE/torch/lib $WHEEL
step 04-bench-wheel python3 scripts/bench_scan.py --runs 3 --wheel $WHEEL --json "$E/bench-wheel.json"
echo; cat "$E/steps.txt"
echo; cat "$E/01-bench-files.out" "$E/01-bench-files.err" | tail -12
echo; sort -t'|' -k2 -n "$E/02-importtime.err" | tail -25
echo; cat "$E/04-bench-wheel.out" "$E/04-bench-wheel.err" | tail -6
