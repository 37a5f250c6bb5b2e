"""`try` whose ledger cannot take the trial once every run is done: the ledger damaged meanwhile (by the workload
itself, here), or a disk that cannot take it. The runs were paid for and the venv is back, so the one line says what
was measured. It said only what was wrong with the ledger, and the verdict and its figures were lost."""

from __future__ import annotations

import json
from pathlib import Path

import tiny
from test_damage import one_error

# the baseline: 100 tok/s (100.5 under TRY_FAST); with TRY_DAMAGE it first writes half a JSON document over that file
PROGRAM = """
import os
damage = os.environ.get("TRY_DAMAGE")
if damage:
    with open(damage, "w") as ledger:
        ledger.write("{")
print(f"decode {100.5 if damage else 100.0:.3f} tok/s")
"""


def test_a_ledger_damaged_during_the_trial_leaves_its_verdict_and_figures_in_the_error(
    tmp_path: Path, provision_bin: str, index_server
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    tiny.profile(
        tool.profiles,
        extra=f'[baseline]\ncommand = ["python", "-c", {json.dumps(PROGRAM)}]\n'
        'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n',
    )
    tool.create("tiny", "--no-checks")
    ledger = tiny.build_of(tool) / "trials.json"
    done = tool("try", "tiny", "lever", "--env", f"TRY_DAMAGE={ledger}", "--runs", "3", check=False)
    one_error(done, 7, "the trial 'lever' ended, better", str(ledger))
    assert "trial [100.5, 100.5, 100.5]" in done.stderr, done.stderr
    assert "the venv is back as it was" in done.stderr, done.stderr
