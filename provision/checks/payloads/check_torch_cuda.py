"""torch sees every GPU, is built for the environment's CUDA, has kernels for each SM, and multiplies correctly."""

from __future__ import annotations

from _common import arguments, covers, crash_reason, emit, relative_error


def main() -> None:
    args = arguments()
    import torch

    expected = args.get("cuda")
    if torch.version.cuda is None:
        emit("fail", f"torch {torch.__version__} is a CPU build (torch.version.cuda is None)")
    if expected and ".".join(torch.version.cuda.split(".")[:2]) != expected:
        emit(
            "fail",
            f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, this environment is for CUDA {expected}",
        )
    if not torch.cuda.is_available():
        emit("fail", "torch.cuda.is_available() is False although the driver shows GPUs")
    count = torch.cuda.device_count()
    if count != args.get("gpu_count", count):
        emit("fail", f"torch sees {count} GPUs, NVML {args['gpu_count']} (CUDA_VISIBLE_DEVICES?)")
    arch_list = torch.cuda.get_arch_list()
    warnings, devices = [], []
    for index in range(count):
        major, minor = torch.cuda.get_device_capability(index)
        kind, labels = covers(arch_list, major, minor)
        if kind == "none":
            emit(
                "fail",
                f"torch's arch list {' '.join(arch_list)} has no kernels for sm_{major}{minor} (GPU {index}): "
                "'no kernel image is available for execution on the device'",
                arch_list=arch_list,
            )
        if kind == "ptx":
            warnings.append(f"sm_{major}{minor} only through PTX {', '.join(labels)} (JIT at first use)")
        torch.backends.cuda.matmul.allow_tf32 = False
        gen = torch.Generator(device="cpu").manual_seed(index + 1)
        a = torch.randn(512, 512, generator=gen, dtype=torch.float32)
        b = torch.randn(512, 512, generator=gen, dtype=torch.float32)
        try:
            out = a.to(f"cuda:{index}") @ b.to(f"cuda:{index}")
            torch.cuda.synchronize(index)
        except RuntimeError as exc:
            emit("fail", f"GPU {index}: matmul failed: {crash_reason(exc)}", arch_list=arch_list)
        error = relative_error(out, a.double() @ b.double())
        if error > 1e-4:
            emit("fail", f"GPU {index}: float32 matmul differs from the float64 reference by {error:.2e}")
        devices.append(
            {
                "index": index,
                "name": torch.cuda.get_device_name(index),
                "sm": f"sm_{major}{minor}",
                "kernels": labels,
                "matmul_rel_error": error,
            }
        )
    details = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch_list": arch_list,
        "devices": devices,
    }
    if warnings:
        emit("warn", "; ".join(warnings), **details)
    emit(
        "pass",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) runs on {count} GPU(s): "
        + ", ".join(sorted({d["sm"] for d in devices}))
        + f"; matmul error <= {max(d['matmul_rel_error'] for d in devices):.1e}",
        **details,
    )


main()
