"""Checks the runner makes itself, in provision's process: a FlashInfer JIT workspace built against another CUDA
major (its path has no CUDA version in it), and the cubins of a build for an absent SM."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from provision import knowledge, regular
from provision.records.details import FlashinferJitDetails, of
from provision.records.results import CheckResult

if TYPE_CHECKING:
    from provision.envs.records import EnvRecord
    from provision.records.checks import Check

LIMIT = 200  # modules read at most: enough to judge a workspace, bounded in time


def cudart_majors(library: Path) -> set[str]:
    """The libcudart.so.N a shared object names in DT_NEEDED."""
    from elftools.common.exceptions import ELFError  # loaded when a workspace has a module to read
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    majors = set()
    try:
        with regular.open_file(library) as handle:  # a pipe named like a library is not waited on
            for section in ELFFile(handle).iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        if tag.entry.d_tag == "DT_NEEDED":
                            match = re.match(r"libcudart\.so\.(\d+)", str(getattr(tag, "needed", "")))
                            if match:
                                majors.add(match.group(1))
    except (OSError, ELFError, ValueError, OverflowError, UnicodeDecodeError):
        pass  # a damaged module (a DT_NEEDED past its string table seeks out of range) names no major it can be held to
    return majors


def workspace(env: dict[str, str]) -> Path:
    return Path(env.get("FLASHINFER_WORKSPACE_BASE") or os.path.expanduser("~")) / ".cache" / "flashinfer"


def check(
    flashinfer: Check, record: EnvRecord, env: dict[str, str], installed: dict[str, str]
) -> CheckResult | None:
    """FAIL when the JIT workspace holds modules linked to another libcudart major than the environment's CUDA."""
    cuda = record.cuda or ""
    local = (installed.get("torch") or "").partition("+cu")[2]
    major: str = cuda.split(".")[0] if cuda else (local[:-1] if len(local) >= 3 else "")
    if not major:
        return None
    root = workspace(env)
    foreign = []
    for count, library in enumerate(root.glob("*/*/cached_ops/**/*.so")):
        if count >= LIMIT:
            break
        others = cudart_majors(library) - {major}
        if others:
            foreign.append((library, sorted(others)[0]))
    if foreign:
        library, other = foreign[0]
        return CheckResult(
            id=flashinfer.id,
            title=flashinfer.title,
            status="fail",
            details=FlashinferJitDetails(workspace=str(root)),
            reason=f"FlashInfer's JIT workspace {root} holds {len(foreign)} module(s) built for CUDA {other} "
            f"(e.g. {library.relative_to(root)} needs libcudart.so.{other}); this environment is CUDA {major}: "
            "clear it, or give each environment its own FLASHINFER_WORKSPACE_BASE",
        )
    return None


def verify_target_cubins(result: CheckResult, target_sm: str) -> CheckResult:
    """Scan what the JIT built for an absent SM: it must carry a cubin that runs on it."""
    from provision.scan import binaries as scan

    details = of(FlashinferJitDetails, result.details) or FlashinferJitDetails()
    built = (details.target.built if details.target else None) or []
    labels: dict[str, int] = {}
    for path in built:
        try:
            counts = scan.counts_in_file(Path(path))
        except Exception as exc:
            return dataclasses.replace(
                result,
                status="fail",
                details=dataclasses.replace(details, target_cubins=labels),
                reason=f"the build for {target_sm}: {path} not read ({type(exc).__name__}: {exc})"[:400],
            )
        for label, number in counts.cubin.items():
            labels[label] = labels.get(label, 0) + number
    result = dataclasses.replace(result, details=dataclasses.replace(details, target_cubins=labels))
    if not any(knowledge.label_runs_on(label, target_sm) for label in labels):
        return dataclasses.replace(
            result,
            status="fail",
            reason=f"the build for {target_sm} carries no cubin that runs on "
            f"it ({', '.join(labels) or 'no cubins'})",
        )
    shown = ", ".join(f"{k} x{v}" for k, v in sorted(labels.items()))
    return dataclasses.replace(result, reason=f"{result.reason}; its cubins: {shown}")
