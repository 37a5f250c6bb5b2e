"""restore rewrites the scripts of what it reinstalled (envs/relocate.py) by reading every .dist-info's METADATA in the
staging copy to find them: another distribution's METADATA that is not UTF-8 (an old package with a Latin-1 author) or
that is a pipe must neither end restore with a traceback nor hang it. Real venv, real uv install, real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from wheelhouse import build_wheel

from provision.envs import drift, relocate
from provision.stacks import uvtool


@pytest.mark.timeout(60)  # a pipe read as METADATA waited forever
def test_scripts_are_rewritten_past_other_distributions_with_damaged_metadata(tmp_path: Path) -> None:
    files = {
        "tool_x/__init__.py": b"def main():\n    print('tool-x 2')\n",
        "tool_x-2.0.dist-info/entry_points.txt": b"[console_scripts]\ntoolx = tool_x:main\n",
    }
    wheel = build_wheel(tmp_path / "wheels", "tool-x", "2.0", files=files)
    venv, staging = tmp_path / "venv", tmp_path / ".venv.restore-1-x"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    subprocess.run(["cp", "-al", str(venv), str(staging)], check=True)
    uvtool.run(["pip", "install", "--python", str(staging / "bin" / "python"), "--quiet", str(wheel)])
    site = drift.site_packages(staging)
    latin = site / "old_pkg-1.0.dist-info"
    latin.mkdir()
    (latin / "METADATA").write_bytes(
        b"Metadata-Version: 1.1\nName: old-pkg\nVersion: 1.0\nAuthor: Jos\xe9 Mar\xeda\n"
    )
    piped = site / "aa_piped-1.0.dist-info"  # sorted before tool_x: read first
    piped.mkdir()
    os.mkfifo(piped / "METADATA")
    assert relocate.scripts(staging, venv, ["tool-x"]) == ["../../../bin/toolx"]
    assert str(staging) not in (staging / "bin" / "toolx").read_text()
