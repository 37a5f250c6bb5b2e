"""A baseline that needs no model: bf16 GEMM TFLOP/s and FlashInfer RMSNorm GB/s on every GPU, timed with CUDA events
after a warm-up, the median of many runs, on random data (never zeros). Prints one JSON line."""

from __future__ import annotations

import json
import statistics


def timed(fn, iterations: int) -> float:  # type: ignore[no-untyped-def]
    import torch

    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main() -> None:
    import torch

    if torch.cuda.device_count() == 0:
        print(json.dumps({"error": "torch sees no CUDA GPU: the built-in baseline has nothing to time"}))
        raise SystemExit(2)
    results = []
    size = 8192
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        a = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
        for _ in range(3):
            a @ b
        seconds = timed(lambda a=a, b=b: a @ b, 20)
        row = {
            "gpu": index,
            "name": torch.cuda.get_device_name(index),
            "bf16_gemm_tflops": 2 * size**3 / seconds / 1e12,
        }
        try:
            import flashinfer

            x = torch.randn(16384, 8192, dtype=torch.bfloat16, device="cuda")
            w = torch.randn(8192, dtype=torch.bfloat16, device="cuda")
            for _ in range(3):
                flashinfer.norm.rmsnorm(x, w)
            seconds = timed(lambda x=x, w=w: flashinfer.norm.rmsnorm(x, w), 50)
            # read x, write out
            row["flashinfer_rmsnorm_gbps"] = (2 * x.numel() + w.numel()) * 2 / seconds / 1e9
        except ImportError:
            row["flashinfer_rmsnorm_gbps"] = None
        results.append(row)
        del a, b
        torch.cuda.empty_cache()
    summary = {
        "bf16_gemm_tflops": min(
            r["bf16_gemm_tflops"] for r in results
        ),  # the slowest GPU bounds tensor parallelism
        "flashinfer_rmsnorm_gbps": min(
            (r["flashinfer_rmsnorm_gbps"] for r in results if r["flashinfer_rmsnorm_gbps"]), default=None
        ),
        "per_gpu": results,
    }
    print(json.dumps(summary))


main()
