"""Smoke checks: each one a small payload script run by the environment's own Python (the registry of them is
records/checks.py)."""

from __future__ import annotations

from pathlib import Path


def payload_dir() -> Path:
    # beside this module in the package, as knowledge.json is read (importlib.resources would load zipfile for it)
    return Path(__file__).parent / "payloads"
