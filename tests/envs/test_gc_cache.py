"""`provision gc` prunes provision's caches (a fetched wheel no lock names; wheels and entries not used for
--older-than days), `gc --cache` does it alone and shows where they live and how large they are."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tomlkit
from launch import run_provision

from provision import wheelfacts

KEPT, DROPPED = "11" * 32, "22" * 32


def lock_naming(path: Path, sha256: str) -> None:
    doc = {
        "lock-version": "1.0",
        "created-by": "tests",
        "requires-python": ">=3.10",
        "packages": [
            {
                "name": "kept",
                "version": "1.0",
                "wheels": [
                    {
                        "name": "kept-1.0-py3-none-any.whl",
                        "url": "https://example.invalid/kept-1.0-py3-none-any.whl",
                        "hashes": {"sha256": sha256},
                    }
                ],
            }
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(doc))


def test_gc_prunes_unnamed_wheels_and_old_entries_and_gc_cache_shows_the_caches(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(xdg), "PROVISION_HOME": str(tmp_path / "home")}
    for sha256 in (KEPT, DROPPED):
        (xdg / "provision/wheels" / sha256).mkdir(parents=True)
        (xdg / "provision/wheels" / sha256 / "w-1.0-py3-none-any.whl").write_bytes(b"x" * 1000)
    os.environ["XDG_CACHE_HOME"] = str(xdg)
    try:
        wheelfacts.put("records", KEPT, {"rows": []})
        wheelfacts.put("scans", DROPPED, {"x": 1})
    finally:
        os.environ.pop("XDG_CACHE_HOME")
    old = time.time() - 40 * 86400
    os.utime(xdg / "provision/scans" / DROPPED, (old, old))
    (xdg / "provision/records/not-a-sha").write_text("foreign")
    lock_naming(tmp_path / "work/lockfiles/pylock.kept.toml", KEPT)

    done = run_provision("gc", "--cache", "--json", env=env, cwd=tmp_path / "work")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    caches = {c["name"]: c for c in document["caches"]}
    assert (
        set(caches) == {"wheels", "scans", "records", "metadata", "urls", "verdicts", "locks", "ahead"}
        and document["cache_only"] is True
    )
    assert caches["wheels"]["path"] == str(xdg / "provision/wheels") and caches["wheels"]["entries"] == 1
    assert (
        caches["wheels"]["removed"] == 1
        and caches["wheels"]["removed_bytes"] == 1000
        and caches["wheels"]["bytes"] == 1000
    )
    assert (xdg / "provision/wheels" / KEPT).is_dir() and not (xdg / "provision/wheels" / DROPPED).exists()
    assert caches["scans"]["removed"] == 1 and caches["scans"]["entries"] == 0  # unused for 40 days
    assert caches["records"]["removed"] == 1 and caches["records"]["entries"] == 1  # the foreign file went
    assert document["removed"] == [] and not (tmp_path / "home").exists()  # --cache: the home untouched

    table = run_provision("gc", "--cache", env={**env, "COLUMNS": "400"}, cwd=tmp_path / "work")
    assert (
        table.returncode == 0 and str(xdg / "provision/wheels") in table.stdout and "1000 B" in table.stdout
    )
    # --older-than 0: everything unused goes, the named wheel too (it can be fetched again)
    done = run_provision("gc", "--older-than", "0", "--json", env=env, cwd=tmp_path / "work")
    caches = {c["name"]: c for c in json.loads(done.stdout)["caches"]}
    assert caches["wheels"]["entries"] == 0 and caches["records"]["entries"] == 0


def test_gc_help_says_where_the_caches_live() -> None:
    done = run_provision("gc", "--help")
    text = " ".join(done.stdout.split())
    assert (
        "$XDG_CACHE_HOME/provision/" in text and "wheels/" in text and "scans/" in text and "--cache" in text
    )
