#!/usr/bin/env bash
# nvidia-h200-x2: `bench allreduce --nccl-tests` against the real all_reduce_perf, read row by row and killed on a stall.
# Needs .carry/nccl-tests-2.19.6.tar.gz and .whl, as scripts/device/x2.sh.
EVIDENCE=${EVIDENCE:-nccl-hang}
. scripts/device/common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NCCLD=$(dirname "$(dirname "$(find $VENV -name 'libnccl.so.2' | head -1)")")
mkdir -p /tmp/nccl/lib; ln -sf $NCCLD/lib/libnccl.so.2 /tmp/nccl/lib/libnccl.so; ln -sfn $NCCLD/include /tmp/nccl/include
step 10-build-nccl-tests bash -c "cd /tmp && tar xzf $PWD/.carry/nccl-tests-2.19.6.tar.gz && cd nccl-tests && make -j32 MPI=0 NCCL_HOME=/tmp/nccl NVCC_GENCODE='-gencode=arch=compute_90,code=sm_90'"
NT=/tmp/nccl-tests/build
step 11-adopt $P adopt h200 $VENV --profile scripts/device/h200-image.toml
# rows arrive one by one through the pseudo-terminal (a pipe would hold them all until exit): the time of each
step 20-rows-as-they-come python3 -c "
import os, time
from provision import proc
start = time.monotonic()
done = proc.run_watched(['$NT/all_reduce_perf', '-b', '8', '-e', '8G', '-f', '4', '-g', '2', '-n', '20'], env=dict(os.environ),
                        first_bound_s=600, on_line=lambda line: print(f'{time.monotonic() - start:8.3f} s  {line}', flush=True))
print('exit', done.returncode, 'timed_out', done.timed_out)"
# a healthy run: no false hang, every row beside provision's, exit 0
step 21-bench-healthy $P bench allreduce h200 --nccl-tests $NT --json
# a stalled all_reduce_perf: found from the bound of the size it is on, killed with its group, provision's rows kept, exit 1.
# The watcher stops it (SIGSTOP: no row, no exit, as a hung NCCL looks from outside) once it has written its header and
# a few rows to the terminal (/proc/PID/io wchar; --iters 2000 puts ~25 ms between rows), or after 20 s at the latest.
python3 - > $E/stopped.txt 2>&1 <<PY &
import os, signal, subprocess, time
pid = None
while pid is None:
    found = subprocess.run(["pgrep", "-n", "-x", "all_reduce_perf"], capture_output=True, text=True).stdout.split()
    pid = int(found[0]) if found else None
    time.sleep(0.01)
start = time.monotonic()
def written():
    return int(open(f"/proc/{pid}/io").read().split("wchar:")[1].split()[0])
while written() < ${STOP_AT_BYTES:-1400} and time.monotonic() - start < 20:
    time.sleep(0.002)
os.kill(pid, signal.SIGSTOP)
print("stopped", pid, "after", round(time.monotonic() - start, 2), "s, wchar", written(), "at", time.strftime("%T"))
PY
step 22-bench-stalled $P bench allreduce h200 --nccl-tests $NT -e 1M --iters 2000 --json
step 23-bench-stalled-left-running bash -c "pgrep -a -x all_reduce_perf || echo 'no all_reduce_perf left'"
step 24-envs-json $P envs --json
echo; cat "$E/steps.txt"; cat "$E/stopped.txt"; echo
cat "$E/20-rows-as-they-come.out"
python3 -c "
import json; d = json.load(open('$E/22-bench-stalled.out'))
for run in d['runs']:
    print('provision rows:', len(run['rows']), '| nccl_tests:', json.dumps({k: v for k, v in run['nccl_tests'].items() if k != 'path'}))"
python3 -c "
import json; d = json.load(open('$E/21-bench-healthy.out'))
for run in d['runs']:
    print('healthy: provision rows', len(run['rows']), 'with nccl-tests beside:', sum('nccl_tests_graph_us' in r for r in run['rows']), run['nccl_tests'].get('error'))"
for f in "$E"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -3 "$f"; }; done
