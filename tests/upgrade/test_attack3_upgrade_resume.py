"""Attack on `provision upgrade --resume`: an upgrade started with one rule, stopped at its baseline step, resumed
asking another (the options on this command line) went on by the record's rule without a word."""

from __future__ import annotations

import json
from pathlib import Path

import tiny
from test_attack3_upgrade_record import stopped
from test_upgrade import made  # noqa: F401  (the fixture)


def test_resume_with_a_rule_that_differs_from_the_records_is_refused(made: tiny.Tool, tmp_path: Path) -> None:  # noqa: F811
    """Started with --max-slowdown 20, resumed asking 0: the record's 20 activated a stack 8.5 % slower, against the
    rule the operator gave on this command line. Now a usage error naming both; the same values (or none) go on."""
    stopped(made, tmp_path, "--max-slowdown", "20")
    done = made("upgrade", "flaky", "--resume", "--runs", "3", "--max-slowdown", "0", "--json", check=False)
    assert done.returncode == 2, done.stdout
    assert "--max-slowdown 0" in done.stderr and "20" in done.stderr, done.stderr
    assert next(n for n, e in made.envs().items() if e["active"]) == "old"
    # the record's settings, asked for nothing else
    done = made("upgrade", "flaky", "--resume", "--json", check=False)
    said = json.loads(done.stdout)
    assert (
        done.returncode == 0
        and said["decision"] == "activated"
        and "within --max-slowdown 20%" in said["reason"]
    ), said
