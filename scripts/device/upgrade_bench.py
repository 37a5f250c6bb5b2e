"""The baseline r-upgrade.sh runs in both environments: bf16 GEMM TFLOP/s of 2048 x 2048 matrices, 2000 in a row timed by
the wall clock with one synchronize at the end, as a serving loop issues kernels. The built-in baseline times one GEMM
between two CUDA events, which CUDA_LAUNCH_BLOCKING=1 does not change (the GPU's time between the events is the
kernel's); here every launch then waits for the kernel before the next is issued, so the GPU idles while the host
prepares each one: the setting a launch-bound workload feels."""

import json
import time

import torch

size, iterations = 2048, 2000
a = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
b = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
for _ in range(50):
    a @ b
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(iterations):
    a @ b
torch.cuda.synchronize()
seconds = time.perf_counter() - start
print(json.dumps({"launch_bound_tflops": 2 * size**3 * iterations / seconds / 1e12, "seconds": seconds}))
