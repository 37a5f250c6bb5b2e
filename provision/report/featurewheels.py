"""A wheel that only some serving paths load (knowledge.toml [[feature_wheel]]: sgl-deep-ep for DeepEP's expert
parallelism, sgl-flash-mla for FlashMLA attention), judged as such in `report --lock` and `report --env`: where it
carries no code for a GPU, it takes that feature away (a feature gate, named under features to leave off, with the
flags and models that need it), unless the profile serves that feature (its `serves` list), where it FAILs the stack
as any other wheel does."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from packaging.utils import canonicalize_name

from provision import knowledge
from provision.report.verdicts import Gate

TAKEN = ("fail", "warn", "error")  # what a wheel's gate says when the GPU cannot run (or only JITs) its code


def judged(gate: Gate, name: str, served: Sequence[str]) -> Gate:
    """`gate` (a wheel's own, kind "stack") as the feature it is: unchanged for a wheel every path loads or one that
    runs here; a feature gate when what it lacks is a feature the profile does not serve; a stack gate naming the
    feature when it does."""
    row = knowledge.feature_wheel(str(canonicalize_name(name)))
    if row is None or gate.status not in TAKEN:
        return gate
    takes = f"takes away {row['feature']} ({row['what']}), which {row['needed_by']} need"
    source = f"{gate.source}; provision/knowledge.toml [[feature_wheel]]: {row['source']}"
    if row["feature"] in served:
        return dataclasses.replace(
            gate, reason=f"{gate.reason}; {takes}, and the profile serves {row['feature']}", source=source
        )
    return dataclasses.replace(
        gate,
        kind="feature",
        source=source,
        reason=f"{gate.reason}; {takes}: leave those off here (the profile does not list "
        f"{row['feature']} in `serves`; with it there, this is a FAIL of the stack)",
    )


def split(failing: Sequence[str], served: Sequence[str]) -> tuple[list[str], list[str]]:
    """Failing packages in two: those that fail the stack, and the feature wheels the profile does not serve (each then
    a feature gate of its own, `judged`)."""
    stack: list[str] = []
    features: list[str] = []
    for name in failing:
        row = knowledge.feature_wheel(str(canonicalize_name(name)))
        (features if row is not None and row["feature"] not in served else stack).append(name)
    return stack, features
