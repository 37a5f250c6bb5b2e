"""`try` and `trials`, shown: a trial's verdict against the baseline and whether NAME came back; the ledger, as one
table per environment or, with several, a matrix of each label's verdict on each environment; the recipes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provision.views import ui
from provision.views.render import Block, Line, Shown, TableBuilder, Verdict

if TYPE_CHECKING:
    from provision.commands.trials import Ledger, RecipeList
    from provision.envs.ledger import Series, Trial

STYLE = {
    "better": "pass",
    "worse": "fail",
    "failed": "error",
    "within-noise": "info",
    "cannot-tell": "warn",
    "not-applicable": "skip",
}


def trial(result: Trial) -> Shown:
    """`provision try`: exit 1 when NAME was not put back, or its baseline did not return to its noise band."""
    return Shown(result.to_dict(), _trial_blocks(result), 0 if _came_back(result) else 1)


def replayed(new: str, old: str, results: Sequence[Trial]) -> Shown:
    """`provision try NEW --replay OLD`: each trial as `try` shows it; exit 1 where one left NEW not back."""
    blocks: list[Block] = [Line(f"{len(results)} trial(s) of {old} replayed on {new}", heading=2)]
    for result in results:
        blocks += _trial_blocks(result)
    document = {"name": new, "replayed_from": old, "trials": [r.to_dict() for r in results]}
    return Shown(document, blocks, 0 if all(_came_back(r) for r in results) else 1)


def ledger(result: Ledger) -> Shown:
    """`provision trials`: one row per trial; with several environments, the matrix too. --markdown: a ticket's page."""
    if not result.trials:
        return Shown(
            result.to_dict(),
            [
                Line(
                    "no trials recorded"
                    + (f" on {', '.join(result.names)}" if result.names else "")
                    + ": provision try NAME LABEL --env K=V"
                )
            ],
        )
    table = TableBuilder(
        "Trials",
        "label",
        "change",
        "environment",
        "median (spread)",
        "baseline",
        "change",
        "verdict",
        "reason",
        "date",
    )
    for t in result.trials:
        table.add(
            t.label,
            t.change.text(),
            t.name,
            _series(t.figure, t.unit),
            _series(t.baseline, t.unit),
            f"{t.change_pct:+.1f}%" if t.change_pct is not None else "-",
            Verdict(t.verdict),
            t.reason,
            ui.moment(t.at),
        )
    blocks: list[Block] = [table.done()]
    names = list(dict.fromkeys(t.name for t in result.trials))
    if len(names) > 1:
        matrix = TableBuilder("Each label on each environment (the last trial of it)", "label", *names)
        for label in result.labels():
            cells = [result.latest(name, label) for name in names]
            matrix.add(label, *(_cell(c) for c in cells))
        blocks.append(matrix.done())
    page: list[Block] = [
        Line(f"Trials on {', '.join(names)}", heading=2),
        *blocks,
        Line(
            "Each trial ran the baseline command N times with the change and was judged against the "
            "environment's baseline of N runs; the environment was put back and its baseline run once "
            "more (`provision trials --json` has every figure)."
        ),
    ]
    return Shown(result.to_dict(), blocks, markdown=page)


def recipes(result: RecipeList) -> Shown:
    """`provision try --list-recipes NAME`."""
    table = TableBuilder(
        f"Recipes on {result.name} (sglang {result.sglang or 'not installed'})",
        "recipe",
        "applies",
        "change or why not",
        "source",
    )
    for fit in result.fits:
        table.add(
            fit.recipe.id,
            Verdict("pass" if fit.applies else "skip"),
            fit.change.text() + (f"\nnot here: {fit.gate_reason}" if fit.gate_reason else "")
            if fit.change is not None
            else fit.reason,
            fit.recipe.source,
        )
    return Shown(
        result.to_dict(),
        [
            table.done(),
            Line("run one: provision try NAME --recipe ID (--force where report says it cannot run here)"),
        ],
    )


def _came_back(result: Trial) -> bool:
    return result.restored and (result.baseline_after is None or result.baseline_after.within_noise)


def _trial_blocks(t: Trial) -> list[Block]:
    lines: list[Block] = []
    if t.baseline_ran_first:
        lines.append(Line(f"{t.name} had no baseline of {len(t.baseline.figures)} runs: ran it first"))
    head = f"{t.name}: {t.label} ({t.change.text()}): {t.verdict.upper()}" + (
        f", {t.reason}" if t.reason else ""
    )
    lines.append(Line(head))
    if t.figure.figures or t.baseline.figures:
        table = TableBuilder("", "side", "median", "spread (min - max)", "runs")
        for side, series in (("baseline", t.baseline), ("with the change", t.figure)):
            table.add(side, _value(series.median, t.unit), _spread(series), str(len(series.figures)))
        lines.append(table.done())
    after = t.baseline_after
    if not t.restored:
        lines.append(
            Line(f"NOT PUT BACK: drift finds {t.name} changed after the trial: provision restore {t.name}")
        )
    if after is not None and after.within_noise:
        lines.append(
            Line(f"{t.name} put back; its baseline is back within its noise: {_value(after.median, t.unit)}")
        )
    elif after is not None:
        got = after.error or f"{_value(after.median, t.unit)}, outside {_spread(t.baseline)}"
        lines.append(
            Line(
                f"WARNING: {t.name}'s baseline did NOT return to its noise band after the trial: {got}. "
                f"Measure again (provision baseline {t.name} --runs 5) before trusting any trial on it"
            )
        )
    return lines


def _cell(t: Trial | None) -> str:
    if t is None:
        return "-"
    return t.verdict + (f" {t.change_pct:+.1f}%" if t.change_pct is not None else "")


def _value(value: float | None, unit: str) -> str:
    return f"{value:.2f} {unit}".strip() if value is not None else "-"


def _spread(series: Series) -> str:
    return f"{min(series.figures):.2f} - {max(series.figures):.2f}" if series.figures else "-"


def _series(series: Series, unit: str) -> str:
    return f"{_value(series.median, unit)} ({_spread(series)})" if series.figures else "-"
