"""Feature gates for an environment, corrected by what its smoke checks saw on the machine: multicast (the
symmetric-memory check), peer access (the NCCL check) and the world size they ran at. The topology says what the
fabric could do; the checks say what it did. Peer access that the NCCL check saw enabled is what the driver allows, not
that peer writes arrive: ACS redirect and a translated IOMMU (report/pcipath.py) stay named beside it."""

from __future__ import annotations

from collections.abc import Mapping

from provision.machine.facts import MachineFacts
from provision.records.details import NcclAllreduceDetails, SymmetricMemoryDetails, of
from provision.records.results import CheckResult
from provision.report.gates import Gate


def apply(
    gates: list[Gate], results: Mapping[str, CheckResult], gpu_count: int, facts: MachineFacts | None = None
) -> list[Gate]:
    """Return `gates` with the all-reduce feature gates decided by the checks' evidence where there is some."""
    symm = results.get("symmetric-memory")
    nccl = results.get("nccl-allreduce")
    out = []
    for gate in gates:
        if gate.id == "symm-mem-allreduce" and symm:
            gate = _symm_mem(gate, symm, gpu_count)
        elif gate.id == "p2p" and nccl:
            gate = _p2p(gate, nccl, facts)
        out.append(gate)
    return out


def _world(world: int | None, gpu_count: int) -> str:
    if world is not None and world != gpu_count:
        return f" (the check ran on {world} of {gpu_count} GPUs)"
    return ""


def _symm_mem(gate: Gate, result: CheckResult, gpu_count: int) -> Gate:
    details = of(SymmetricMemoryDetails, result.details) or SymmetricMemoryDetails()
    where = _world(details.world_size, gpu_count)
    if result.failed:
        return Gate(
            **{
                **gate.__dict__,
                "status": "fail",
                "reason": f"the symmetric-memory check failed on this machine{where}: {result.reason}"[:400],
            }
        )
    if details.multicast is False and gate.status != "fail":
        disabled = details.multicast_disabled_by_env
        why = f" (TORCH_SYMM_MEM_DISABLE_MULTICAST={disabled})" if disabled else ""
        return Gate(
            **{
                **gate.__dict__,
                "status": "fail",
                "reason": f"the symmetric-memory check saw no multicast{why}{where}; SGLang's symmetric-memory all-reduce "
                "needs it: leave --enable-torch-symm-mem off",
            }
        )
    if details.multicast is True and gate.status == "pass":
        return Gate(
            **{
                **gate.__dict__,
                "reason": f"SM and fabric supported; the symmetric-memory check saw multicast{where}",
            }
        )
    return gate


def _p2p(gate: Gate, result: CheckResult, facts: MachineFacts | None) -> Gate:
    from provision.report import pcipath

    details = of(NcclAllreduceDetails, result.details)
    matrix = details.peer_access if details else None
    if matrix is None or len(matrix) < 2:
        return gate
    missing = [f"{i}-{j}" for i, row in enumerate(matrix) for j, ok in enumerate(row) if i < j and not ok]
    problems = pcipath.findings(facts).problems if facts is not None else []
    if missing:
        why = "; ".join(problems) if problems else "check ACS/IOMMU (nccl#606, #2079)"
        return Gate(
            **{
                **gate.__dict__,
                "status": "warn",
                "reason": f"the NCCL check saw no peer access for {', '.join(missing[:6])}: {why}",
            }
        )
    seen = f"the NCCL check saw peer access between all {len(matrix)} GPUs"
    if problems:  # the driver allowing peer access is what vllm#51513 saw before its peer writes were dropped
        return Gate(
            **{
                **gate.__dict__,
                "status": "warn",
                "reason": f"{seen}, which the driver allows; but " + "; ".join(problems),
            }
        )
    return Gate(**{**gate.__dict__, "status": "pass", "reason": seen})
