"""Where FlashInfer gets its kernels in a lock or an environment, and where an environment's kernel caches lie.

FlashInfer 0.7.2 (flashinfer/jit/env.py) takes its cubins from a flashinfer-cubin of exactly its own version, its
compiled modules from a flashinfer-jit-cache (and its per-architecture providers) of its version (`+cuXYZ` allowed);
one of another version is ignored with a warning, and then cubins are downloaded at first use and modules are
JIT-compiled with the nvcc it finds. A machine that reaches no network breaks at the first request that needs one."""

from __future__ import annotations

from pathlib import Path

from provision import knowledge
from provision.report.verdicts import Gate, Versions


def _release(version: str | None) -> str:
    return (version or "").split("+")[0]


def flashinfer_kernels(versions: Versions, *, nvcc: str | None, offline: bool) -> Gate | None:
    """The `flashinfer-kernels` gate: PASS with matching kernel wheels, WARN when cubins would be downloaded at first
    use (FAIL for a profile that says `offline = true`); None where the stack has no FlashInfer."""
    flashinfer = versions.of("flashinfer-python")
    if flashinfer is None:
        return None
    g = knowledge.gate("flashinfer_kernels")
    own = _release(flashinfer)
    cubin = versions.of("flashinfer-cubin")
    jit = {name: v for name, v in versions.found.items() if name.startswith("flashinfer-jit-cache")}
    cache = "FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/cubins"
    downloads = False
    if cubin and _release(cubin) == own:
        cubins = f"cubins from flashinfer-cubin {cubin}"
    else:
        downloads = True
        cubins = (
            f"flashinfer-cubin {cubin} is not {own}: ignored, cubins downloaded at first use into {cache}"
            if cubin
            else f"no flashinfer-cubin {own}: cubins downloaded at first use into {cache}"
        )
    matching = {n: v for n, v in jit.items() if _release(v) == own}
    if matching:
        modules = "compiled modules from " + ", ".join(f"{n} {v}" for n, v in sorted(matching.items()))
    else:
        stale = (
            f"{', '.join(f'{n} {v}' for n, v in sorted(jit.items()))} is not {own}: ignored; " if jit else ""
        )
        modules = f"{stale}modules JIT-compiled at first use with " + (
            f"nvcc {nvcc}" if nvcc else "an nvcc: none found (see flashinfer-jit)"
        )
    reason = f"FlashInfer {flashinfer} ({versions.origin}): {cubins}; {modules}"
    fix = (
        f"; add flashinfer-cubin=={own} (and flashinfer-jit-cache=={own} from FlashInfer's index) to the profile, or run "
        f"`python -m flashinfer download-kernels` where the network is reached"
    )
    if downloads and offline:
        return Gate(
            id="flashinfer-kernels",
            title=g["title"],
            status="fail",
            source=g["source"],
            reason=f"{reason}: the profile says offline = true, so the first request that needs a cubin fails{fix}",
        )
    if downloads:
        return Gate(
            id="flashinfer-kernels",
            title=g["title"],
            status="warn",
            source=g["source"],
            reason=f"{reason}{fix}",
        )
    return Gate(id="flashinfer-kernels", title=g["title"], status="pass", source=g["source"], reason=reason)


# The caches a stack writes as it runs, by the variable that moves each (shipped and generated profiles set them under
# the environment, so a rollback never runs the old stack on kernels or tunings the new one made).
CACHE_VARIABLES = (
    "SGLANG_CACHE_DIR",
    "FLASHINFER_WORKSPACE_BASE",
    "FLASHINFER_CUBIN_DIR",
    "FLASHINFER_AUTOTUNE_DIR",
)


def cache_folders(env: dict[str, str], home: Path) -> list[tuple[str, Path, str]]:
    """(what, folder, set by) for each cache of SGLang and FlashInfer under the environment variables `env` (filled),
    with the defaults of sglang 0.5.23 (srt/environ.py) and flashinfer 0.7.2 (jit/env.py, comm/pcie_ipc_tuning.py)
    where a variable is unset."""
    base = Path(env["FLASHINFER_WORKSPACE_BASE"]) if env.get("FLASHINFER_WORKSPACE_BASE") else home
    flashinfer = base / ".cache" / "flashinfer"
    by = "FLASHINFER_WORKSPACE_BASE" if env.get("FLASHINFER_WORKSPACE_BASE") else "default (~)"
    found = [
        (
            "SGLang (triton, inductor, deep_gemm, cute_aot)",
            Path(env["SGLANG_CACHE_DIR"]) if env.get("SGLANG_CACHE_DIR") else home / ".cache" / "sglang",
            "SGLANG_CACHE_DIR" if env.get("SGLANG_CACHE_DIR") else "default (~/.cache/sglang)",
        ),
        (
            "FlashInfer cubins",
            Path(env["FLASHINFER_CUBIN_DIR"]) if env.get("FLASHINFER_CUBIN_DIR") else flashinfer / "cubins",
            "FLASHINFER_CUBIN_DIR" if env.get("FLASHINFER_CUBIN_DIR") else by,
        ),
        ("FlashInfer JIT modules (VERSION/ARCH/cached_ops)", flashinfer, by),
    ]
    tuning = Path(env["FLASHINFER_AUTOTUNE_DIR"]) if env.get("FLASHINFER_AUTOTUNE_DIR") else None
    found.append(
        (
            "PCIe all-reduce tuning (pcie_ipc_all_reduce_ws*.json)",
            tuning or flashinfer,
            "FLASHINFER_AUTOTUNE_DIR" if tuning else f"{by} (VERSION/ARCH/autotune)",
        )
    )
    return found


def size(folder: Path, limit: int = 200_000) -> int | None:
    """The bytes of the files under `folder` (links not followed), None when it is not there; at most `limit` files."""
    if not folder.is_dir():
        return None
    total = 0
    for count, path in enumerate(folder.rglob("*")):
        if count >= limit:
            break
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def caches_gate(env: dict[str, str], root: Path, home: Path) -> Gate:
    """An info gate listing where each cache of the environment lies and its size; a WARN for one outside `root`."""
    rows, outside = [], []
    for what, folder, by in cache_folders(env, home):
        bytes_ = size(folder)
        rows.append(f"{what}: {folder} ({'not made yet' if bytes_ is None else _mib(bytes_)}; {by})")
        if not folder.resolve().is_relative_to(root.resolve()):
            outside.append(what)
    source = "sglang 0.5.23 srt/environ.py (SGLANG_CACHE_DIR); flashinfer 0.7.2 jit/env.py (FLASHINFER_WORKSPACE_BASE, FLASHINFER_CUBIN_DIR), comm/pcie_ipc_tuning.py (FLASHINFER_AUTOTUNE_DIR)"
    where = (
        f"{', '.join(outside)} outside {root}: a rollback would run the old stack on what the new one cached; "
        "set them under {env} in the profile's [env] (docs/profiles.md); "
        if outside
        else ""
    )
    return Gate(
        id="caches",
        title="kernel and tuning caches of the environment",
        status="info",
        kind="feature",
        source=source,
        reason=where + "; ".join(rows),
    )


def _mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"
