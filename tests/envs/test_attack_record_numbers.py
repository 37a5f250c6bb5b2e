"""An env.json number past what a float holds (an integer of 400 digits: JSON has no bound, Python's int none either):
`float()` of it raised OverflowError, and so did the size column's division, so `envs`, `report --env`, `check`,
`shell-env` and the rest ended in `internal error: OverflowError` (exit 3). The one reader of record files refuses it
now as it refuses a file that is not JSON it wrote: exit 7, one line naming the file and the number."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from launch import run_provision
from test_attack_json_nesting import a_home

HUGE = 10**400


@pytest.mark.parametrize(
    "record",
    [
        {"size_bytes": HUGE},
        {
            "checks": {
                "at": "2026-12-02T00:00:00+00:00",
                "results": [
                    {"id": "imports", "title": "t", "status": "pass", "reason": "r", "seconds": HUGE}
                ],
            }
        },
    ],
    ids=["size_bytes", "a check's seconds"],
)
def test_a_number_past_a_floats_range_in_env_json_is_one_line_naming_the_file(
    tmp_path: Path, record: dict
) -> None:
    home, build = a_home(tmp_path)
    (build / "env.json").write_text(json.dumps({"name": "x", **record}))
    for args in (("envs",), ("shell-env", "x"), ("report", "--env", "x", "--json")):
        done: subprocess.CompletedProcess[str] = run_provision("--home", str(home), *args, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert (
            done.returncode == 7 and "internal error" not in done.stderr and "Traceback" not in done.stderr
        ), (args, done.stderr)
        assert (
            lines[0]
            == f"error: {build / 'env.json'}: not JSON provision wrote (the integer 100000000000... of 401 digits is out of range)"
        ), lines
        assert lines[1].startswith(f"hint: fix or remove that key in {build / 'env.json'}"), lines
