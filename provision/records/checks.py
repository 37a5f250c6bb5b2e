"""The check registry: each smoke check's id, title, payload script and needs, quick ones first. Data that profiles
validate against (stacks/profiles.py), drift answers for, and the runner runs (checks/runner.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Check:
    id: str
    title: str
    payload: str | None  # a script in payloads/, or None for a check decided in provision's own process
    needs_gpu: bool = True
    needs: tuple[str, ...] = ()  # distributions that must be installed, any of each "a|b" alternative
    timeout: float = 300.0


CHECKS = (
    # a whole SGLang stack's server entry point took 264 s to import on a 2-core machine with a cold disk
    Check(
        id="imports",
        title="every package of the profile imports",
        payload="check_imports.py",
        needs_gpu=False,
        timeout=900,
    ),
    Check(
        id="drift",
        title="installed files match their RECORD, distributions the lock",
        payload=None,
        needs_gpu=False,
    ),
    Check(id="driver", title="the driver supports the environment's CUDA release", payload=None),
    Check(
        id="torch-cuda",
        title="torch sees every GPU and has kernels for its SM",
        payload="check_torch_cuda.py",
        needs=("torch",),
    ),
    Check(
        id="cuda-libs",
        title="CUDA libraries come from one CUDA major and one place",
        payload="check_cuda_libs.py",
        needs=("torch",),
    ),
    Check(
        id="sgl-kernel",
        title="sgl-kernel imports and runs an op on each GPU",
        payload="check_sgl_kernel.py",
        needs=("torch", "sgl-kernel|sglang-kernel"),
    ),
    Check(
        id="symmetric-memory",
        title="torch symmetric memory: rendezvous, peer reads, one-shot all-reduce",
        payload="check_symmetric_memory.py",
        needs=("torch",),
        timeout=600,
    ),
    Check(
        id="nccl-allreduce",
        title="NCCL all-reduce exact across every GPU, and the peer-access matrix",
        payload="check_nccl_allreduce.py",
        needs=("torch",),
        timeout=600,
    ),
    Check(
        id="flashinfer-jit",
        title="FlashInfer versions agree and its JIT builds and runs a kernel for each SM",
        payload="check_flashinfer_jit.py",
        needs=("torch", "flashinfer-python"),
        timeout=1800,
    ),
    # last: the slowest, and it needs what the checks above prove (torch on every GPU, the kernels, NCCL for TP > 1)
    Check(
        id="sglang-serve",
        title="SGLang serves generate requests on a weight-free model, then stops whole",
        payload="check_sglang_serve.py",
        needs=("torch", "sglang"),
        timeout=900,
    ),
)
BY_ID = {c.id: c for c in CHECKS}
