"""What a restore killed with -9 left outside its own folders, by the exact names it recorded in BUILD/.restore-made
(envs/restore.py writes the record; `gc` and the next restore read it). Apart from restore.py, so that `gc` loads
neither the drift check nor uv's runner to find that nothing was left."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from provision import regular
from provision.envs import records
from provision.errors import ProvisionError

MADE = ".restore-made"  # in the build folder: the exact paths a restore made outside its own folders, for cleaning up


def remove_stale(build: Path) -> list[Path]:
    """What a restore killed with -9 made, by the exact names it recorded in BUILD/.restore-made: the staging copy
    beside the venv (before its swap a copy, after it the old tree) and its subset lock. Nothing else is touched, however
    it is named. The caller holds the build's restore lock or saw that no restore holds it."""
    record = build / MADE
    try:
        # a link or a pipe there: not ours
        with os.fdopen(regular.open_fd(record, follow=False), "rb") as handle:
            data = json.loads(handle.read(1 << 16))
        made = [Path(p) for p in data["made"] if isinstance(p, str)]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        made = []  # damaged: nothing in it can be trusted to be ours
    try:  # a staging copy lies beside this environment's venv, named after it: nothing else, whatever the record says
        venv = records.read(build).venv_path(build).resolve()
    except (ProvisionError, OSError, RuntimeError):
        venv = None
    removed = []
    for path in made:
        if not _ours(build, path, venv):
            continue
        if path.is_symlink() or path.is_file():
            path.unlink(missing_ok=True)
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            continue
        removed.append(path)
    record.unlink(missing_ok=True)
    return removed


def _ours(build: Path, path: Path, venv: Path | None) -> bool:
    """Whether `path` is what a restore of `build` makes: a subset lock in it, a staging folder beside its venv."""
    if path.parent == build and re.fullmatch(r"pylock\.restore-\d+\.toml", path.name):
        return True
    return (
        venv is not None
        and path.parent == venv.parent
        and re.fullmatch(re.escape(f".{venv.name}.restore-") + r"\d+-\d{8}T\d{6}Z", path.name) is not None
    )
