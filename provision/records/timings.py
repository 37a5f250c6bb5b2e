"""A series of timing figures summarised (a baseline's runs, a trial's, one side of an upgrade): one rule for the
median and the spread every `--json` document gives beside the figures (compare, try, upgrade)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict


class Summary(TypedDict):
    """In the order docs/json.md gives the keys; each figure None where there is none."""

    median: float | None
    min: float | None
    max: float | None
    runs: int
    figures: list[float]


def summary(figures: Sequence[float]) -> Summary:
    """The median, the spread (min - max), the count and the figures themselves, as `--json` gives them."""
    import statistics  # decimal and fractions with it: only where figures are summarised

    return {
        "median": statistics.median(figures) if figures else None,
        "min": min(figures, default=None),
        "max": max(figures, default=None),
        "runs": len(figures),
        "figures": list(figures),
    }
