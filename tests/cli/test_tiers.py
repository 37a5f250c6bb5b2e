"""The quick tier (`pytest -m "not slow and not network"`, README) leaves out the tests measured slow: every line of
tests/slow_tests.txt names a test that exists (a renamed or removed test would silently fall back into the quick tier
otherwise), and conftest marks each of them `slow`."""

from __future__ import annotations

import ast

from conftest import ROOT, SLOW, _measured_slow


def test_every_measured_slow_test_exists() -> None:
    missing = []
    for test in sorted(_measured_slow()):
        path, _, name = test.partition("::")
        source = ROOT / path
        defined = (
            {n.name for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.FunctionDef)}
            if source.is_file()
            else set()
        )
        if name.split("::")[-1] not in defined:
            missing.append(test)
    assert len(_measured_slow()) > 100 and not missing, (
        f"{SLOW} names tests that are gone (run scripts/slow_tests.py): {missing[:5]}"
    )


def test_the_measured_slow_tests_are_marked(pytestconfig) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "-m",
            "slow",
            "tests/envs/test_envs.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    listed = [line.split("[", 1)[0] for line in done.stdout.splitlines() if "::" in line]
    measured = {t for t in _measured_slow() if t.startswith("tests/envs/test_envs.py::")}
    assert measured and measured <= set(listed), (sorted(measured - set(listed))[:5], done.stderr[-500:])
