"""Attack on `provision try NEW --replay OLD`: the content a --file trial wrote is kept in OLD's build folder
(trial-files/SHA256) and written again on NEW. A kept copy edited since (or a link put in its place, or a ledger whose
sha256 is a path such as ../../x) was written over NEW's venv as if it were what OLD tried, under a new sha256. Now a
copy that is not its sha256's content is refused before anything runs on NEW (exit 7, the copy named)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_try import site_of, tool_with_baseline


@pytest.mark.parametrize("damage", ["edited", "link", "path"])
def test_a_kept_copy_that_is_not_what_was_tried_is_refused(
    tmp_path: Path, index_server, provision_bin: str, damage: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin, "old")
    tool_with_baseline(tmp_path, index_server, provision_bin, "new")
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 1.0\n")
    done = tool(
        "try", "old", "same", "--file", f"alpha/__init__.py={patched}", "--runs", "3", "--json", check=False
    )
    assert done.returncode == 0, done.stderr
    build = Path(tool.envs()["old"]["path"]).resolve()
    (copy,) = (build / "trial-files").iterdir()
    evil = tmp_path / "evil.py"
    evil.write_text("FACTOR = 5.0\nopen(__file__ + '.ran', 'w')\n")
    if damage == "edited":
        copy.write_text(evil.read_text())
    elif damage == "link":
        copy.unlink()
        os.symlink(evil, copy)
    else:
        ledger = json.loads((build / "trials.json").read_text())
        ledger["trials"][0]["change"]["files"][0]["sha256"] = os.path.relpath(evil, build / "trial-files")
        (build / "trials.json").write_text(json.dumps(ledger))
    target = site_of(tool, "new") / "alpha" / "__init__.py"
    original = target.read_bytes()
    done = tool("try", "new", "--replay", "old", "--runs", "3", "--json", check=False)
    assert done.returncode == 7, done.stdout  # before: exit 0, the trial ran NEW with evil.py's content
    assert "trial-files" in done.stderr or "sha256" in done.stderr, done.stderr
    assert json.loads(tool("trials", "new", "--json").stdout)["trials"] == []
    assert target.read_bytes() == original
