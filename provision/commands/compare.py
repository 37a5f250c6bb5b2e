"""`provision compare`: two environments' latest baselines read from their records, side by side, judged by the
one rule of checks/baseline.py (`judge`: better, worse, within noise or cannot tell)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.checks.baseline import Compared, Comparison
from provision.envs import records
from provision.errors import EnvError

if TYPE_CHECKING:
    from provision.envs.home import Home


def compare(home: Home, first: str, second: str) -> Comparison:
    """Each environment's latest baseline call (every run of a `baseline --runs N`, else the last run): median and
    spread; the change between the medians, and whether the spreads cover it (within noise)."""
    sides = []
    # both exist, before a baseline is asked
    read = {name: records.read(home.build_of(name)) for name in (first, second)}
    for name in (first, second):
        record = read[name]
        if not record.baselines:
            raise EnvError(f"{name} has no baseline yet", f"run one: provision baseline {name}")
        last = record.baselines[-1]
        series = [r for r in record.baselines if r.series == last.series] if last.series else [last]
        sides.append(
            Compared(
                name=name,
                unit=last.unit,
                better=last.better,
                at=last.at,
                machine=last.machine.summary,
                runs=len(record.baselines),
                figures=[r.figure for r in series if r.figure is not None],
                multi_gpu_allreduce=record.allreduce[-1] if record.allreduce else None,
                drift=last.drift,
            )
        )
    return Comparison(first=sides[0], second=sides[1])
