"""Shared by the payloads (run by the environment's Python: stdlib and the environment's own packages only)."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


def arguments() -> dict[str, Any]:
    return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}


def emit(status: str, reason: str, **details: Any) -> None:
    """Print the verdict as the last line of stdout and exit 0: the runner reads that line."""
    sys.stdout.flush()
    print(json.dumps({"status": status, "reason": reason, "details": details}, default=str), flush=True)
    sys.exit(0)


def crash_reason(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:500]


def relative_error(out: Any, ref: Any) -> float:
    import torch

    out64, ref64 = out.double().cpu(), ref.double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30))


def covers(arch_list: list[str], major: int, minor: int) -> tuple[str, list[str]]:
    """('native', labels) when a cubin runs on major.minor (torch's own rule), ('ptx', labels) when only PTX does."""
    native, ptx = [], []
    for label in arch_list:
        kind, _, number = label.partition("_")
        digits = "".join(c for c in number if c.isdigit())
        if not digits:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        exact_only = number.endswith("a")
        if kind == "sm" and a_major == major and (a_minor == minor if exact_only else a_minor <= minor):
            native.append(label)
        elif kind == "compute" and (a_major, a_minor) <= (major, minor):
            ptx.append(label)
    return ("native", native) if native else ("ptx", ptx) if ptx else ("none", [])
