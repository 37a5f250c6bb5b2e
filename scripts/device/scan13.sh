#!/usr/bin/env bash
# Issue 13 on a quiet machine (no GPU needed; the H200 image has the big CUDA libraries and cuobjdump): whole-process
# `provision scan --json FILE` on the five largest libraries of the image's venv beside cuobjdump, wheels in place
# beside `unzip -p`, and the whole-venv scan.   Run: bash scripts/device/scan13.sh
EVIDENCE=scan13
. scripts/device/common.sh
LARGEST=$(find $SITE -name '*.so*' -type f -printf '%s %p\n' | sort -rn | head -5 | cut -d' ' -f2)
WHEELS=$(find .whl -name '*.whl' -size +20M 2>/dev/null | head -3 | sed 's/^/--wheel /')
step 01-import-time python3 -X importtime -m provision scan --json $(echo $LARGEST | cut -d' ' -f1)
step 02-bench-scan python3 scripts/bench_scan.py --runs 9 $LARGEST $(ls $SITE/nvidia/cu13/lib/libcufft.so* 2>/dev/null | head -1) $WHEELS --venv $SITE --json "$E/bench-scan.json"
step 03-scan-venv $P scan --json --require 9.0 --require 12.0 $SITE
echo; cat "$E/steps.txt"; echo; cat "$E/02-bench-scan.out" "$E/02-bench-scan.err" | tail -30
