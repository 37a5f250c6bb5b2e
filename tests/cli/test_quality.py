"""The house style is checked, not hoped for: ruff's lint and its formatter, and strict mypy over the package, as part of
the test suite (.pre-commit-config.yaml runs the same before a commit)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-m", "ruff", "check", "provision", "tests", "scripts", "contrib"],
        [sys.executable, "-m", "ruff", "format", "--check", "provision", "tests", "scripts", "contrib"],
        pytest.param([sys.executable, "-m", "mypy"], marks=pytest.mark.slow),
    ],  # strict, with its cache empty in a clone
    ids=["ruff", "ruff-format", "mypy"],
)
def test_lint_and_types(argv: list[str]) -> None:
    if (
        shutil.which(argv[2]) is None
        and subprocess.run([sys.executable, "-m", argv[2], "--version"], capture_output=True).returncode
    ):
        pytest.skip(f"{argv[2]} is not installed (pip install -e '.[test]')")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
