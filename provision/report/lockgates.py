"""The gates of `report --lock` that judge the lock as a whole, on any machine: no two wheels install one path
(from their RECORDs), and NVIDIA's libraries are of one CUDA major."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provision.report.verdicts import Gate
from provision.stacks import lockcheck

if TYPE_CHECKING:
    from provision.report.wheels import WheelScan


def conflict(wheels: Sequence[WheelScan]) -> Gate:
    """FAIL where two wheels install one path with different contents: whichever installs last wins, half of each."""
    title = "no two wheels install the same path"
    source = "the wheels' RECORD files (PEP 376/427); provision/stacks/lockcheck.py"
    records = {w.wheel: w.record for w in wheels if w.record is not None}
    unread = [w.wheel for w in wheels if w.record is None]
    found = sorted(lockcheck.conflicts(records), key=lockcheck.Conflict.rank)
    if found:
        more = f"; {len(found) - 1} more pairs" if len(found) > 1 else ""
        if found[0].loose:
            return Gate(
                id="conflict",
                title=title,
                status="warn",
                source=source,
                reason=f"{found[0].message()}{more}: only loose top-level files, the one installed last wins; no package is split",
            )
        if not found[0].comparable:
            return Gate(
                id="conflict",
                title=title,
                status="warn",
                source=source,
                reason=f"{found[0].message()}{more}: compare the two files, or lock wheels whose RECORDs use one algorithm",
            )
        return Gate(
            id="conflict",
            title=title,
            status="fail",
            source=source,
            reason=f"{found[0].message()}{more}: the one installed last overwrites the other; drop one from the profile",
        )
    if unread:
        return Gate(
            id="conflict",
            title=title,
            status="skip",
            source=source,
            reason=f"{len(unread)} of {len(wheels)} wheels not read (e.g. {unread[0]}); the {len(records)} read share no path",
        )
    return Gate(
        id="conflict",
        title=title,
        status="pass",
        source=source,
        reason=f"the {len(records)} wheels share no path",
    )


def cuda_mix(wheels: Sequence[WheelScan]) -> Gate:
    title = "NVIDIA's libraries are of one CUDA major"
    source = "https://github.com/pytorch/pytorch/issues/186591; provision/stacks/lockcheck.py"
    pairs = [(w.name, w.version) for w in wheels]
    mixed = lockcheck.cuda_mix(pairs)
    if mixed:
        return Gate(
            id="cuda-mix",
            title=title,
            status="fail",
            source=source,
            reason=f"{mixed}: libraries of two CUDA majors load into one process; pin the packages of one CUDA release",
        )
    majors = lockcheck.cuda_majors(pairs)
    return Gate(
        id="cuda-mix",
        title=title,
        status="pass",
        source=source,
        reason=f"CUDA {next(iter(majors))} only" if majors else "no CUDA-versioned package",
    )
