"""`provision report` as one operation: the machines (recorded probe documents, else this one probed), judged against
the profiles chosen, then each lock and environment asked for, and the fleet summary over them all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.log import Progress
from provision.report.fleet import FleetSummary
from provision.report.gates import MachineReport


@dataclass(frozen=True, kw_only=True)
class ReportResult:
    """What `provision report` found: one report per machine, in the order given, and the summary over them."""

    machines: tuple[MachineReport, ...]
    summary: FleetSummary

    def to_dict(self) -> dict[str, Any]:
        from provision import knowledge

        return {
            "summary": self.summary.to_dict(),
            "machines": [m.to_dict() for m in self.machines],
            "knowledge_as_of": knowledge.as_of(),
        }


def build(
    machine_files: Sequence[Path],
    profile_names: Sequence[str] = (),
    *,
    locks: Sequence[Path] = (),
    env_names: Sequence[str] = (),
    fetch: bool = True,
    home: str | Path | None = None,
    progress: Progress = lambda _: None,
    allow_unsealed: bool = False,
) -> ReportResult:
    """Judge the machines of `machine_files` (none: this machine, probed) against the profiles named (none: every
    profile, or none at all when locks are judged), every lock in `locks` and every environment in `env_names` (of
    `home`). A lock's wheels are scanned once for all machines; with `fetch` false only the cached ones; a lock without
    its seal is refused unless `allow_unsealed`."""
    from provision.report import fleet, gates
    from provision.stacks import profiles, uvtool

    if machine_files:
        facts = [gates.load_machine(path) for path in machine_files]
    else:
        from provision.machine import probe

        facts = [probe.probe()]
    chosen = (
        [profiles.load(n) for n in profile_names] if profile_names else [] if locks else profiles.available()
    )
    uv_cache = Path(uvtool.cache_dir() or ".")
    targets = [list(report.targets) for report in gates.report(facts, chosen, uv_cache)]
    if locks:
        from provision.report import lockscan

        for path in locks:
            # a wheel's code judges nothing where no machine has a GPU: only the RECORDs are read then
            scanned, stack = lockscan.read_lock(
                path,
                fetch=fetch,
                uv_cache=uv_cache,
                progress=progress,
                code=any(m.gpus for m in facts),
                allow_unsealed=allow_unsealed,
            )
            for machine, found in zip(facts, targets, strict=True):
                found.append(lockscan.judge(machine, scanned, stack, uv_cache))
    if env_names:
        from provision.envs import home as homes
        from provision.report import environments

        where = homes.Home(homes.resolve(home))
        for machine, found in zip(facts, targets, strict=True):
            found.extend(environments.judge(where, name, machine, progress) for name in env_names)
    machines = tuple(MachineReport(facts=m, targets=tuple(t)) for m, t in zip(facts, targets, strict=True))
    return ReportResult(machines=machines, summary=fleet.summarize(machines))
