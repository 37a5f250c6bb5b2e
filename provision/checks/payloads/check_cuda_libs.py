"""After CUDA initialises, the CUDA libraries mapped in the process come from one CUDA major and one folder."""

from __future__ import annotations

import os
import re

from _common import arguments, crash_reason, emit

FAMILIES = re.compile(
    r"/(lib(cudart|cublas|cublasLt|cudnn|nvrtc|nccl|cusparse|cufft|curand|cusolver|nvJitLink|cupti))\.so\.(\d+)"
)


def main() -> None:
    arguments()
    import torch

    try:
        x = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        (x @ x).float().sum().item()  # cuBLAS
        torch.nn.functional.conv2d(
            torch.randn(1, 3, 16, 16, device="cuda"), torch.randn(4, 3, 3, 3, device="cuda")
        )
        torch.cuda.synchronize()
    except RuntimeError as exc:
        emit("fail", f"CUDA work failed while loading the libraries: {crash_reason(exc)}")
    loaded: dict[str, set[tuple[str, str]]] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            match = FAMILIES.search(line)
            if match:
                path = line.split()[-1]
                loaded.setdefault(match.group(1), set()).add(
                    (match.group(3), os.path.dirname(os.path.realpath(path)))
                )
    problems = []
    for family, places in sorted(loaded.items()):
        majors = sorted({m for m, _ in places})
        folders = sorted({f for _, f in places})
        if len(majors) > 1:
            problems.append(f"{family}.so.{' and .so.'.join(majors)} both loaded (a cu12/cu13 mix)")
        elif len(folders) > 1:
            problems.append(f"{family} loaded from {len(folders)} folders: {', '.join(folders)}")
    torch_major = (torch.version.cuda or "0").split(".")[0]
    cudart = {m for m, _ in loaded.get("libcudart", set())}
    if cudart and cudart != {torch_major}:
        problems.append(
            f"libcudart.so.{'/'.join(sorted(cudart))} loaded, but torch is built for CUDA {torch.version.cuda}"
        )
    summary = {family: sorted(f"so.{m} in {f}" for m, f in places) for family, places in loaded.items()}
    if problems:
        emit("fail", "; ".join(problems), loaded=summary)
    emit(
        "pass",
        f"{len(loaded)} CUDA library families, one major ({torch_major}) and one folder each",
        loaded=summary,
    )


main()
