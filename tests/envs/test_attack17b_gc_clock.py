"""`gc --cache` against clocks: an entry or wheel whose time lies years ahead (written while the clock was wrong,
corrected since) was kept by every prune until the clock caught up; it goes now, while a time an hour ahead (a
clock set back by NTP) is kept as just used, and a time of 0 goes. `--older-than nan` was taken (nan compares false
with the bound) and kept everything for ever as 'not used for nan days': a usage error now, as --max-slowdown nan."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from launch import run_provision
from test_damage import one_error
from test_gc_cache import lock_naming

from provision import wheelfacts

AHEAD, SOON, EPOCH = "aa" * 32, "bb" * 32, "cc" * 32


def test_entries_from_a_wrong_clock_are_pruned_and_nan_is_refused(tmp_path: Path, isolated) -> None:
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "provision"
    now = time.time()
    times = {AHEAD: now + 10 * 365 * 86400, SOON: now + 3600, EPOCH: 0.0}
    for sha256, when in times.items():
        wheelfacts.put("scans", sha256, {"x": 1})
        os.utime(cache / "scans" / sha256, (when, when))
        wheel = cache / "wheels" / sha256
        wheel.mkdir(parents=True)
        (wheel / "checked").touch()
        os.utime(wheel / "checked", (when, when))
    work = tmp_path / "work"
    for sha256 in times:  # each wheel named by a lock: only its age can remove it
        lock_naming(work / "lockfiles" / f"pylock.w{sha256[:2]}.toml", sha256)

    for value in ("nan", "NaN"):
        one_error(run_provision("gc", "--cache", "--older-than", value, cwd=work), 2, "is not a number")
    assert sorted(p.name for p in (cache / "scans").iterdir()) == sorted(times)

    done = run_provision("gc", "--cache", "--older-than", "30", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    caches = {c["name"]: c for c in json.loads(done.stdout)["caches"]}
    for kind in ("scans", "wheels"):
        assert caches[kind]["removed"] == 2 and [p.name for p in (cache / kind).iterdir()] == [SOON], kind
    one_error(run_provision("upgrade", "--to-env", "x", "--max-slowdown", "nan"), 2, "is not a number")
