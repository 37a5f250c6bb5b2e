"""Attacks on `provision upgrade`'s record: an upgrade stopped at its baseline step (the baseline failed: a step
`error`, exit 7), then resumed with its record damaged in ways JSON still parses (a rule's number out of range, a
finished step whose figures are missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiny
from launch import run_provision
from test_upgrade import made  # noqa: F401  (the fixture)

FLAKY = """\
import os, pathlib, sys
if (pathlib.Path(sys.argv[1]) / "FAIL").exists():
    sys.exit("the GPU fell off the bus")
print(f"decode {float(os.environ['UPGRADE_FIGURE']):.2f} tok/s")
"""


def stopped(tool: tiny.Tool, tmp_path: Path, *args: str) -> Path:
    """`upgrade flaky ARGS` stopped at its baseline step (the baseline fails while FAIL exists); its record's path."""
    (tmp_path / "flaky.py").write_text(FLAKY)
    (tmp_path / "FAIL").write_text("")
    tiny.profile(
        tool.profiles,
        "flaky",
        'alpha = "==2.0"',
        extra=(
            '[env]\nUPGRADE_FIGURE = "75"\n'
            f'[baseline]\ncommand = ["python", "{tmp_path / "flaky.py"}", "{tmp_path}"]\n'
            'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
        ),
    )
    done = tool("upgrade", "flaky", "--runs", "3", "--baseline-from", "flaky", *args, check=False)
    assert done.returncode == 7 and "the GPU fell off the bus" in done.stderr, done.stderr
    (tmp_path / "FAIL").unlink()
    (record,) = tool.home.glob("builds/flaky-*/upgrade.json")
    return record


@pytest.mark.parametrize("damage", ["runs", "slowdown", "figures"])
def test_a_record_damaged_within_json_is_refused_naming_it(
    made: tiny.Tool,  # noqa: F811 (the fixture)
    tmp_path: Path,
    damage: str,
) -> None:
    """runs 10**9 ran the baseline a billion times a side; max_slowdown 1e999 (Infinity) activated any slower stack; a
    baseline step `pass` without its figures ended in an AssertionError. Each is now the record named, exit 7."""
    path = stopped(made, tmp_path)
    record = json.loads(path.read_text())
    if damage == "runs":
        record["settings"]["runs"] = 10**9
    elif damage == "slowdown":
        record["settings"]["max_slowdown"] = 1e999  # written as Infinity
    else:
        record["steps"][-1] = {
            "step": "baseline",
            "status": "pass",
            "seconds": 1.0,
            "result": "3 runs a side",
        }
    path.write_text(json.dumps(record))
    done = run_provision("upgrade", "flaky", "--resume", env=made.env(None), timeout=60)
    assert done.returncode == 7, done.stderr
    assert f"{path}: not an upgrade record" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert next(n for n, e in made.envs().items() if e["active"]) == "old"
