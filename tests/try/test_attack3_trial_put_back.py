"""Attacks on putting a trial's files back (envs/trialfiles.py): what `.trial-made` lists is removed or rewritten in
the venv by the next command on the environment. A folder of the venv that became a link out of it (the program under
trial swapped it, or a planted journal names a path under such a link) had the file at the link's end deleted: a file
outside every home. A damaged entry (its mode `"x"`, its saved copy gone) ended every command on the environment in
an internal error (exit 3)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import tiny
from test_try import site_of, tool_with_baseline


def journal(tool: tiny.Tool, *entries: dict) -> Path:
    build = Path(tool.envs()["tiny"]["path"]).resolve()
    (build / ".trial-made").write_text(json.dumps({"pid": 1, "files": list(entries)}))
    return build


def test_a_file_to_remove_under_a_link_out_of_the_venv_is_never_deleted(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "new.py").write_text("a canary\n")
    os.symlink(outside, site_of(tool) / "evil")
    build = journal(tool, {"path": "evil/new.py", "saved": None, "mode": 0o644})
    done = tool("run", "tiny", "--", "python", "-c", "print(1)", check=False)
    assert (outside / "new.py").read_text() == "a canary\n"  # deleted through the link before
    assert done.returncode == 7 and "evil" in done.stderr and str(outside) in done.stderr, done.stderr
    assert (build / ".trial-made").exists()  # kept: restore (or its removal) decides, nothing guessed


@pytest.mark.parametrize("damage", ["mode", "copy-gone"])
def test_a_damaged_entry_is_named_not_an_internal_error(
    tmp_path: Path, index_server, provision_bin: str, damage: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    site = site_of(tool)
    original = (site / "alpha" / "__init__.py").read_bytes()
    digest = hashlib.sha256(original).hexdigest()
    build = journal(
        tool, {"path": "alpha/__init__.py", "saved": digest, "mode": "x" if damage == "mode" else 0o644}
    )
    if damage == "mode":
        (build / "trial-saved").mkdir()
        (build / "trial-saved" / digest).write_bytes(original)
    done = tool("run", "tiny", "--", "python", "-c", "print(1)", check=False)
    assert done.returncode == 7 and "internal error" not in done.stderr, done.stderr
    assert (".trial-made" if damage == "mode" else "cannot be read") in done.stderr, done.stderr
    assert (site / "alpha" / "__init__.py").read_bytes() == original
    assert (build / ".trial-made").exists()


def test_an_environment_whose_trial_cannot_be_put_back_is_still_listed(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """`envs` skipped an environment whose leftover trial could not be put back: it vanished from the list without a
    word, as if removed. Now it is listed and the reason said on stderr."""
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    journal(tool, {"path": "alpha/__init__.py", "saved": "0" * 64, "mode": 0o644})
    done = tool("envs", "--json", check=False)
    assert done.returncode == 0 and [e["name"] for e in json.loads(done.stdout)["environments"]] == [
        "tiny"
    ], done.stdout
    assert "warning: tiny:" in done.stderr and "cannot be read" in done.stderr, done.stderr
