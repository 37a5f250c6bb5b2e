"""sgl-kernel imports and runs one of its ops (RMSNorm) on each GPU, compared with a torch reference."""

from __future__ import annotations

from _common import arguments, crash_reason, emit, relative_error


def main() -> None:
    args = arguments()
    import torch

    try:
        import sgl_kernel
    except BaseException as exc:  # an ABI mismatch with torch shows here as 'undefined symbol'
        emit(
            "fail",
            f"import sgl_kernel failed: {crash_reason(exc)} (sgl-kernel is built against one torch version)",
        )
    op = getattr(sgl_kernel, "rmsnorm", None)
    if op is None:
        emit(
            "warn",
            f"sgl_kernel {getattr(sgl_kernel, '__version__', '?')} imported, but has no rmsnorm op to run",
        )
    errors = []
    for index in range(int(args.get("gpu_count") or torch.cuda.device_count())):
        device = f"cuda:{index}"
        x = torch.randn(64, 4096, dtype=torch.bfloat16, device=device)
        w = torch.randn(4096, dtype=torch.bfloat16, device=device)
        try:
            out = op(x, w, 1e-6)
            torch.cuda.synchronize(index)
        except BaseException as exc:
            emit("fail", f"GPU {index}: sgl_kernel.rmsnorm failed: {crash_reason(exc)}")
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        errors.append(relative_error(out, ref))
    if max(errors) > 2e-2:
        emit("fail", f"sgl_kernel.rmsnorm differs from the reference by {max(errors):.2e}")
    emit(
        "pass",
        f"sgl_kernel {getattr(sgl_kernel, '__version__', '')} rmsnorm on {len(errors)} GPU(s), error <= {max(errors):.1e}",
    )


main()
