#!/usr/bin/env bash
# The adversary's fixes on the GPU machine (one H200, a working driver): probe still reads the GPU through NVML's
# bounded start (PROVISION_NVML_START_TIMEOUT, default 60 s) and in the same time (probe --json x5, wall), report reads
# it too; then NVML libraries that lack nvmlInitWithFlags, refuse to start (9, driver not loaded) or never answer
# (sleep), each a note within the bound, never a hang (the hung one with PROVISION_NVML_START_TIMEOUT=2).
#   Run: bash scripts/device/attack.sh
EVIDENCE=attack
. scripts/device/common.sh
step 01-probe $P probe --json
step 02-probe-times bash -c "for i in 1 2 3 4 5; do /usr/bin/time -f %e $P probe --json >/dev/null; done"
step 03-report $P report --json
F=/tmp/fake-nvml; mkdir -p $F/nosym $F/err $F/hang
printf 'int nvmlInit_v2(void){return 0;}\n' > $F/nosym.c
printf 'int nvmlInitWithFlags(unsigned f){return 9;}\nint nvmlInit_v2(void){return 9;}\nint nvmlShutdown(void){return 0;}\nconst char* nvmlErrorString(int r){return "Driver Not Loaded";}\n' > $F/err.c
printf '#include <unistd.h>\nint nvmlInitWithFlags(unsigned f){sleep(600);return 0;}\nint nvmlInit_v2(void){sleep(600);return 0;}\n' > $F/hang.c
for n in nosym err hang; do cc -shared -fPIC -o $F/$n/libnvidia-ml.so.1 $F/$n.c; done
step 04-fake-nosym env LD_LIBRARY_PATH=$F/nosym timeout 120 $P probe --json
step 05-fake-err env LD_LIBRARY_PATH=$F/err timeout 120 $P probe --json
step 06-fake-hang env LD_LIBRARY_PATH=$F/hang PROVISION_NVML_START_TIMEOUT=2 timeout 120 $P probe --json
echo; cat "$E/steps.txt"; echo; cat "$E/02-probe-times.err"
for s in 01-probe 04-fake-nosym 05-fake-err 06-fake-hang; do
  echo "$s: $(python3 -c "import json,sys; d=json.load(open('$E/$s.out')); print(len(d['gpus']), 'GPU(s);', d['notes'][:2])" 2>&1 | tail -1)"
done
