"""A profile's baseline pattern that backtracks without end on its output (`(a+)+$` against forty a's and a b):
`provision baseline` searched for hours with the command long finished (Ctrl-C the only way out). The search now has
a deadline: past it, one error naming the pattern (exit 7, nothing stored)."""

from __future__ import annotations

import time

import pytest

from provision.errors import EnvError


@pytest.mark.timeout(30)
def test_a_catastrophic_baseline_pattern_is_an_error_in_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.checks import baseline
    from provision.stacks.profiles import Baseline

    monkeypatch.setattr(baseline, "PATTERN_SECONDS", 0.3, raising=False)
    spec = Baseline(command=("true",), pattern=r"(a+)+$")
    started = time.monotonic()
    with pytest.raises(EnvError) as raised:
        baseline.extract(spec, "a" * 40 + "b\n")
    assert time.monotonic() - started < 20
    assert "the baseline pattern '(a+)+$' took over 0.3 s" in raised.value.message
    assert "[baseline] pattern" in raised.value.hint
    assert baseline.extract(Baseline(command=("true",), pattern=r"tok/s: (\S+)"), "tok/s: 3.5\n") == (
        3.5,
        None,
    )
