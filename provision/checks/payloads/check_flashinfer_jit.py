"""FlashInfer: its three packages agree, the nvcc its JIT will use can target each SM, FLASHINFER_CUDA_ARCH_LIST covers
every GPU, and a JIT-compiled RMSNorm runs correctly on each SM. With target_sm, also build for an SM that is absent
(in a child process: FlashInfer reads its arch list at import) and hand the built library back for a cubin scan."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from importlib import metadata

from _common import arguments, crash_reason, emit, relative_error


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def nvcc_path() -> str | None:
    """The nvcc FlashInfer's JIT resolves (flashinfer/jit/cpp_ext.py: FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH, PATH)."""
    if os.environ.get("FLASHINFER_NVCC"):
        return os.environ["FLASHINFER_NVCC"]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc")
    return found or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def arch_entry_runs_on(entry: str, major: int, minor: int) -> bool:
    match = re.match(r"^(\d+)\.(\d+)([af]?)$", entry.strip())
    if not match:
        return False
    e_major, e_minor, suffix = int(match.group(1)), int(match.group(2)), match.group(3)
    if suffix == "a":
        return (e_major, e_minor) == (major, minor)
    return e_major == major and e_minor <= minor


def arch_entry(target: str, nvcc_version: tuple[int, int], suffixes: dict[str, str], family_min: str) -> str:
    """FLASHINFER_CUDA_ARCH_LIST's entry for an SM given as "9.0" or "12.0": the suffix its major takes (knowledge.toml's
    table: 9.0a, 12.0f), "a" for a family target where nvcc predates family targets; an entry with a suffix as given.
    There is no sm_90f: appending "f" to every SM made `check --target-sm 9.0` build for 9.0f, which nvcc refuses."""
    if target[-1] in "af":
        return target
    suffix = suffixes.get(target.split(".")[0], "")
    if suffix == "f" and nvcc_version < tuple(int(p) for p in family_min.split(".")[:2]):
        suffix = "a"
    return target + suffix


def build_only() -> None:
    """Child mode: build the RMSNorm module for FLASHINFER_CUDA_ARCH_LIST and print its library path."""
    from flashinfer.jit.norm import gen_norm_module

    spec = gen_norm_module()
    start = time.perf_counter()
    spec.build(False)
    print(json.dumps({"built": str(spec.jit_library_path), "seconds": time.perf_counter() - start}))


def main() -> None:
    args = arguments()
    if args.get("mode") == "build-only":
        build_only()
        return
    import torch

    py, cubin, jit_cache = (
        version("flashinfer-python"),
        version("flashinfer-cubin"),
        version("flashinfer-jit-cache"),
    )
    details: dict[str, object] = {
        "flashinfer_python": py,
        "flashinfer_cubin": cubin,
        "flashinfer_jit_cache": jit_cache,
    }
    if cubin and cubin != py:
        emit(
            "fail",
            f"flashinfer-cubin {cubin} != flashinfer-python {py} (flashinfer raises at import)",
            **details,
        )
    if jit_cache:
        public, _, local = jit_cache.partition("+")
        if not public.startswith(str(py)):
            emit("fail", f"flashinfer-jit-cache {jit_cache} does not match flashinfer-python {py}", **details)
        torch_major = (torch.version.cuda or "").split(".")[0]
        if local.startswith("cu") and torch_major and not local[2:].startswith(torch_major):
            emit(
                "fail",
                f"flashinfer-jit-cache {jit_cache} is built for {local}, torch for CUDA {torch.version.cuda}",
                **details,
            )
    nvcc = nvcc_path()
    if not nvcc or not os.path.exists(nvcc):
        emit(
            "fail",
            f"no nvcc for FlashInfer's JIT (looked at {nvcc or 'FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH, PATH'})",
            **details,
        )
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"release (\d+)\.(\d+)", out.stdout)
    nvcc_version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    codes = subprocess.run(
        [nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    details.update(nvcc=nvcc, nvcc_version=".".join(map(str, nvcc_version)))
    arch_list = os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").split()
    details["arch_list"] = arch_list
    ccs = sorted({tuple(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())})
    for major, minor in ccs:
        if f"sm_{major}{minor}" not in codes:
            emit(
                "fail", f"nvcc {details['nvcc_version']} at {nvcc} cannot target sm_{major}{minor}", **details
            )
        if major == 12 and nvcc_version < (12, 9) and not any(e.endswith("a") for e in arch_list):
            emit(
                "fail",
                f"SM {major}.{minor} needs nvcc >= 12.9 for FlashInfer's JIT (it has {details['nvcc_version']}); "
                "use a CUDA 12.9+/13 toolkit or FLASHINFER_CUDA_ARCH_LIST=12.0a",
                **details,
            )
        if arch_list and not any(arch_entry_runs_on(e, major, minor) for e in arch_list):
            emit(
                "fail",
                f"FLASHINFER_CUDA_ARCH_LIST={' '.join(arch_list)} has nothing for sm_{major}{minor}: "
                "JIT modules would carry no code for this GPU",
                **details,
            )
    try:
        import flashinfer
        from flashinfer.jit import env as jit_env
    except BaseException as exc:
        emit("fail", f"import flashinfer failed: {crash_reason(exc)}", **details)
    details["workspace"] = str(jit_env.FLASHINFER_WORKSPACE_DIR)
    runs = []
    for major, minor in ccs:
        index = next(
            i
            for i in range(torch.cuda.device_count())
            if torch.cuda.get_device_capability(i) == (major, minor)
        )
        device = f"cuda:{index}"
        x = torch.randn(64, 4096, dtype=torch.bfloat16, device=device)
        w = torch.randn(4096, dtype=torch.bfloat16, device=device)
        start = time.perf_counter()
        try:
            out = flashinfer.norm.rmsnorm(x, w, eps=1e-6)
            torch.cuda.synchronize(index)
        except BaseException as exc:
            emit(
                "fail", f"sm_{major}{minor}: FlashInfer's JIT RMSNorm failed: {crash_reason(exc)}", **details
            )
        first = time.perf_counter() - start
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        error = relative_error(out, ref)
        runs.append({"sm": f"sm_{major}{minor}", "first_call_s": round(first, 2), "rel_error": error})
        if error > 2e-2:
            emit(
                "fail",
                f"sm_{major}{minor}: FlashInfer RMSNorm differs from the reference by {error:.2e}",
                **details,
            )
    details["runs"] = runs
    target = args.get("target_sm")
    if target:
        entry = arch_entry(
            target, nvcc_version, args.get("arch_suffix") or {}, args.get("family_suffix_min_nvcc") or "12.9"
        )
        env = {**os.environ, "FLASHINFER_CUDA_ARCH_LIST": entry}
        child = subprocess.run(
            [sys.executable, __file__, json.dumps({"mode": "build-only"})],
            capture_output=True,
            text=True,
            env=env,
            timeout=1500,
        )
        lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
        if child.returncode != 0 or not lines:
            emit(
                "fail",
                f"building for {entry} failed: {(child.stderr or child.stdout).strip().splitlines()[-1:]}",
                **details,
            )
        built = json.loads(lines[-1])
        details["target"] = {
            "arch_list": entry,
            "built": [built["built"]],
            "seconds": round(built["seconds"], 1),
        }
    emit(
        "pass",
        f"FlashInfer {py} JIT with nvcc {details['nvcc_version']}: RMSNorm on "
        + ", ".join(f"{r['sm']} (first call {r['first_call_s']} s, error {r['rel_error']:.1e})" for r in runs)
        + (f"; built for {details['target']['arch_list']}" if target else ""),
        **details,
    )


if __name__ == "__main__":
    main()
