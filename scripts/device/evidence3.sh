#!/usr/bin/env bash
# Third GPU call: the whole-venv scan after the speed fix, cuFFT and cuFile against cuobjdump, rollback with history.
EVIDENCE=evidence3
. scripts/device/common.sh
step 01-scan-venv-json $P scan --json --require 9.0 --require 12.0 $SITE
step 02-scan-venv-table $P scan --require 9.0 --require 12.0 $SITE
step 03-bench-scan python3 scripts/bench_scan.py $SITE/torch/lib/libtorch_cuda.so $(ls $SITE/nvidia/cu13/lib/libcufft.so* $SITE/nvidia/cu13/lib/libcufile.so* 2>/dev/null | head -3) --venv $SITE --json "$E/bench-scan.json"
step 04-cuobjdump-cufft bash -c "for f in $SITE/nvidia/cu13/lib/libcufft.so*; do echo \$f; cuobjdump --list-elf \$f | sed -E 's/.*\.(sm_[0-9]+[a-z]?)\..*/\1/' | sort | uniq -c; cuobjdump --list-ptx \$f | wc -l; done"
step 05-adopt-a $P adopt a $VENV
step 06-adopt-b $P adopt b $VENV
step 07-switch bash -c "$P switch a && $P switch b"
step 08-rollback-times bash -c "for i in 1 2 3 4 5 6 7; do /usr/bin/time -f '%e s rollback' $P rollback; done"
step 09-switch-times bash -c "for i in 1 2 3 4 5; do /usr/bin/time -f '%e s switch' $P switch a; done"
step 10-probe-times bash -c "for i in 1 2 3 4 5 6 7; do /usr/bin/time -f '%e s probe --json' $P probe --json > /dev/null; done"
step 11-report-times bash -c "for i in 1 2 3 4 5; do /usr/bin/time -f '%e s report' $P report > /dev/null; done"
echo; cat "$E/steps.txt"; echo
tail -25 "$E/02-scan-venv-table.out"; cat "$E/03-bench-scan.out" "$E/04-cuobjdump-cufft.out" "$E/08-rollback-times.err" "$E/09-switch-times.err" "$E/10-probe-times.err" "$E/11-report-times.err" | grep -v "^active"
