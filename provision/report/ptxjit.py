"""The `ptx-driver` gate: kernels that would JIT from PTX a newer toolkit made than the driver's CUDA. Minor-version
compatibility runs a CUDA 13.2 build on a driver that reports 13.0 (the driver gate PASSes it with a note), but not its
PTX: where a package carries only PTX for a GPU, built with CUDA newer than the driver supports, the driver's JIT
fails at first load with cudaErrorUnsupportedPtxVersion."""

from __future__ import annotations

from collections.abc import Iterable

from provision import knowledge
from provision.machine.facts import MachineFacts
from provision.report.verdicts import Gate

TITLE = "the driver can JIT the PTX the stack would run"


def gate(
    facts: MachineFacts, ptx_only: Iterable[tuple[str, str | None, str]], cuda: str | None
) -> Gate | None:
    """WARN naming each (package, version, GPU compute capability) that runs there only through PTX built with a CUDA
    newer than the driver's, and the driver to install; None where there is none (nothing to say). A package's CUDA
    is its local version tag's (+cu132), else `cuda`, the stack's own release (a profile's, a lock's, an environment's)."""
    driver = facts.driver.cuda
    found: dict[str, list[str]] = {}
    for name, version, cc in ptx_only:
        built = knowledge.cuda_of_local(version or "") or (cuda if cuda and cuda != "?" else None)
        if built and knowledge.ptx_too_new(built, driver):
            found.setdefault(built, []).append(f"{name} {version or '?'} on {knowledge.sm_name(cc)}")
    if not found:
        return None
    newest = max(found, key=lambda v: tuple(int(p) for p in v.split(".")))
    rows = knowledge.tables()["minor_compat"]
    source = next((r["source"] for r in rows if r["major"] == newest.split(".")[0]), rows[0]["source"])
    minimum = knowledge.driver_minimum(newest)
    install = (
        f"a driver >= {minimum}"
        if minimum
        else f"a driver that supports CUDA {newest} (nvidia-smi's 'CUDA Version' {newest} or newer)"
    )
    shown = "; ".join(
        f"{', '.join(items[:6])}{', ...' if len(items) > 6 else ''}: PTX only, made by CUDA {built}"
        for built, items in sorted(found.items())
    )
    return Gate(
        id="ptx-driver",
        title=TITLE,
        status="warn",
        source=source,
        reason=f"{shown}; driver {facts.driver.version} supports CUDA up to {driver}: its JIT of that PTX fails at "
        f"first load with cudaErrorUnsupportedPtxVersion; install {install}",
    )
