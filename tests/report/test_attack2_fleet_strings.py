"""A probe document with an enormous string (a driver version, a GPU name, a note of megabytes): `report --machine`
drew it in a table, and rich folds a long cell in time that grows with its square (a 10 MB version took 74 s, a
64 MB one would take most of an hour). No string probe writes is longer than a path: a longer one is refused in one
line naming the file and the key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from launch import run_provision

H200 = ROOT / "docs/machines/h200.probe.json"


@pytest.mark.parametrize(("where", "key"), [("driver", "version"), ("gpus", "name"), ("notes", None)])
def test_a_probe_document_with_a_huge_string_is_refused_in_one_line(
    tmp_path: Path, where: str, key: str | None
) -> None:
    data = json.loads(H200.read_text())
    huge = "x" * 1_000_000
    if where == "gpus":
        data["gpus"][0][key] = huge
    elif key is None:
        data[where] = [huge]
    else:
        data[where][key] = huge
    path = tmp_path / "huge.probe.json"
    path.write_text(json.dumps(data))
    done = run_provision("report", "--machine", str(path), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    named = {"driver": "driver.version", "gpus": "gpus[0].name", "notes": "notes[0]"}[where]
    assert done.stderr.startswith(f"error: {path}: not a probe document ({named}: 1000000 characters long"), (
        done.stderr[:300]
    )
    assert "\nhint: make one on that machine" in done.stderr and len(done.stdout) < 1000
