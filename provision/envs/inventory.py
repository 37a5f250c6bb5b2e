"""What environments there are: the rows of `provision envs`, their worst check status, their size on disk."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision import status as statuses
from provision.envs import records
from provision.envs.home import FAILED, Home
from provision.errors import EnvError

if TYPE_CHECKING:
    from provision.checks.results import CheckResult


def listing(home: Home) -> list[dict[str, Any]]:
    active = home.active()
    rows = []
    for name in home.names():
        try:
            build = home.build_of(name)
        except EnvError:
            continue
        record = records.read(build)
        rows.append({
            "name": name, "active": name == active, "path": str(build), "venv": record.venv or str(build / "venv"),
            "profile": record.profile, "cuda": record.cuda, "python": record.python,
            "size_bytes": record.size_bytes, "created": record.created, "adopted": record.adopted,
            "failed": (build / FAILED).exists(),
            "check_status": worst_status(record.check_results),
            "baseline": record.baselines[-1].to_dict() if record.baselines else None,
        })
    return rows


def worst_status(results: list[CheckResult]) -> str | None:
    return statuses.worst(r.status for r in results)


def tree_size(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for file in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, file)).st_size
    return total
