"""Where a venv keeps its packages: one definition, below every module of envs/ that needs it (home.py re-exports it)."""

from __future__ import annotations

from pathlib import Path


def site_packages(venv: Path) -> Path:
    """The venv's site-packages folder (lib/python3.X/site-packages)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else venv / "lib" / "site-packages"
