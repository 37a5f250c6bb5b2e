"""Checks and measurements, shown: `check`, `baseline`, `compare`, `bench allreduce`. Each takes the typed result and
returns a `Shown` (its JSON document, its tables and lines, its exit code); nothing here prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision import status as statuses
from provision.log import printable
from provision.records.results import overall
from provision.views import ui
from provision.views.render import Block, Line, Raw, Shown, TableBuilder, Verdict

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.checks.baseline import Comparison
    from provision.records.allreduce_runs import AllreduceRow, AllreduceRun, VariantRun
    from provision.records.results import BaselineRun, CheckResult

COUNTED = ("pass", "warn", "fail", "skip", "error")


def checks(name: str, results: list[CheckResult], *, strict: bool = False) -> Shown:
    """`provision check`: exit 1 on FAIL or ERROR, and with `strict` on WARN too."""
    status = overall(results)
    counts = {s: sum(1 for r in results if r.status == s) for s in COUNTED}
    document = {
        "environment": name,
        "status": status,
        "summary": {**counts, "total": len(results)},
        "checks": [r.to_dict() for r in results],
    }
    failed = statuses.failed(status) or (strict and status == "warn")
    return Shown(document, check_blocks(name, results), 1 if failed else 0)


def check_blocks(name: str, results: list[CheckResult]) -> list[Block]:
    """The checks' table, their counts, and the last lines of each failed check's output (create and restore too)."""
    table = TableBuilder(
        f"Checks of {name}: {overall(results).upper()}", "check", "status", "seconds", "reason"
    )
    for r in results:
        table.add(r.id, Verdict(r.status), f"{r.seconds:.1f}", r.reason)
    counts = {s: sum(1 for r in results if r.status == s) for s in COUNTED}
    blocks: list[Block] = [
        table.done(),
        Line(", ".join(f"{v} {k}" for k, v in counts.items() if v) + f" of {len(results)}"),
    ]
    blocks += [
        Line(f"--- {r.id} output (last lines) ---\n{r.output_tail}")
        for r in results
        if r.failed and r.output_tail
    ]
    return blocks


def baseline(name: str, runs: list[BaselineRun]) -> Shown:
    """`provision baseline`: the last run's record, and every figure of this call (--runs N)."""
    import statistics  # decimal and fractions with it: `check`, which shares this module, needs none

    last, figures = runs[-1], [r.figure for r in runs if r.figure is not None]
    shown = figures or [0.0]
    several = (
        f"median of {len(shown)} runs: {', '.join(f'{f:.2f}' for f in shown)}; " if len(shown) > 1 else ""
    )
    line = (
        f"{name}: {statistics.median(shown):.2f} {last.unit} ({several}{last.better} is better) "
        f"on {last.machine.summary}, last run {last.seconds} s"
    )
    return Shown({"name": name, **last.to_dict(), "figures": [r.figure for r in runs]}, [Line(line)])


def comparison(result: Comparison) -> Shown:
    """`provision compare`: each side's median and spread, the change, and what to be careful of."""
    table = TableBuilder(
        "Baselines", "environment", "median", "spread (min - max)", "runs compared", "when", "machine"
    )
    sides = (result.first, result.second)
    for side in sides:
        figures = side.figures
        spread = (
            f"{min(figures):.2f} - {max(figures):.2f}"
            if len(figures) > 1
            else "- (one run: baseline --runs N)"
        )
        median = f"{side.median:.2f} {side.unit}" if side.median is not None else "-"
        table.add(side.name, median, spread, str(len(figures)), ui.moment(side.at), side.machine)
    blocks: list[Block] = [table.done()]
    change = result.change_percent
    if change is not None:
        from provision.checks.baseline import MIN_RUNS

        verdict = {
            "within-noise": "within noise: the spreads cover it",
            "cannot-tell": f"cannot tell: fewer than {MIN_RUNS} runs a side; baseline --runs {MIN_RUNS}",
        }.get(result.verdict, result.verdict)
        blocks.append(Line(f"{result.second.name} vs {result.first.name}: {change:+.1f}% ({verdict})"))
    if not result.same_machine:
        blocks.append(Line("note: the two baselines ran on different machines"))
    for side in sides:
        if side.drift is not None and side.drift.drifted:
            blocks.append(
                Line(
                    f"note: {side.name}'s baseline was measured on a drifted environment ({side.drift.summary}): "
                    f"provision check {side.name} --only drift; provision restore {side.name}"
                )
            )
    return Shown(result.to_dict(), blocks)


def allreduce(name: str, run: AllreduceRun) -> Shown:
    """The table of nccl-tests' all_reduce_perf (in-place), eager and graph-captured; with nccl-tests' own figures from
    the same call beside each, their ratio and what torch.distributed adds per op. Exit 1 when nccl-tests beside it
    hung or failed (its error is shown, provision's figures kept)."""
    lines: list[str] = []
    for variant in run.runs:
        lines += _variant_lines(name, run, variant)
    # Raw is never escaped: nccl-tests' own lines reach it in its error
    text = printable("\n".join(lines) + "\n")
    return Shown(
        {"name": name, **run.to_dict()},
        [Raw(text)],
        1 if run.anchor_failures() else 0,
        markdown=[Raw(f"```\n{text}```\n")],
    )


def _variant_lines(name: str, run: AllreduceRun, measured: VariantRun) -> list[str]:
    from provision.records.allreduce_runs import KINDS, NcclTestsFigures

    variant = " ".join(f"{k}={v}" for k, v in measured.variant.items()) or "NCCL defaults"
    lines = [f"# {name}: all_reduce sum float, {run.world_size} rank(s), {run.backend}, {variant}"]
    # provision's own figures stand alone
    if measured.anchor_error is not None and measured.nccl_tests is not None:
        lines.append(f"# nccl-tests {measured.nccl_tests.path}: {measured.anchor_error}")
    anchor = measured.nccl_tests if isinstance(measured.nccl_tests, NcclTestsFigures) else None
    if anchor:
        lines.append(
            f"# beside nccl-tests {anchor.path} (NCCL {anchor.nccl_library}): 'nccl' is its in-place "
            "time, 'x' provision/nccl-tests, '+torch' what torch.distributed adds per op"
        )
    head, unit = f"# {'size':>10} {'count':>11}", f"# {'(B)':>10} {'(elements)':>11}"
    for kind in KINDS:
        head += f" | {kind + ' (us)':>11} {'busbw':>7}" + (
            f" {'nccl':>7} {'x':>5} {'+torch':>7}" if anchor else ""
        )
        unit += f" | {'':>11} {'(GB/s)':>7}" + (f" {'(us)':>7} {'':>5} {'(us)':>7}" if anchor else "")
    lines += [head + f" {'#wrong':>6}", unit]
    lines += [_row_line(row, bool(anchor)) for row in measured.rows]
    pattern = measured.pattern
    if pattern:
        theirs = anchor.pattern if anchor else {}
        small, large = (_beside_anchor(pattern, theirs, key) for key in ("122x42KB_ms", "2x2.5MB_ms"))
        lines.append(
            f"# verify pass in one CUDA graph: 122 x 42 KB = {small}; 2 x 2.5 MB (same bytes, coalesced) = {large}"
        )
        if "122x42KB_one_buffer_ms" in pattern:
            lines.append(f"# the 122 on one buffer: {pattern['122x42KB_one_buffer_ms']:.3f} ms")
    lines += [f"# note: {note}" for note in measured.notes or []]
    unclean = [t.note or t.error or "not clean" for t in measured.teardown if t.clean is False]
    if unclean:
        lines.append("# teardown: " + "; ".join(unclean))
    return lines


def _row_line(row: AllreduceRow, anchored: bool) -> str:
    from provision.records.allreduce_runs import KINDS

    line = f"  {row.size:>10} {row.count:>11}"
    for kind in KINDS:
        side = row.side(kind)
        if side is None:
            line += f" | {'-':>11} {'-':>7}" + (f" {'-':>7} {'-':>5} {'-':>7}" if anchored else "")
            continue
        line += f" | {side.us:11.2f} {_figure(side.busbw, 7)}"
        if anchored:
            line += (
                f" {side.nccl_tests_us:7.2f} {_figure(side.ratio, 5)} {_figure(side.torch_overhead_us, 7)}"
                if side.nccl_tests_us is not None
                else f" {'-':>7} {'-':>5} {'-':>7}"
            )
    return line + f" {row.wrong:>6}"


def _figure(value: float | None, width: int) -> str:
    return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"


def _beside_anchor(mine: dict[str, float], theirs: dict[str, float], key: str) -> str:
    text = f"{mine[key]:.3f} ms"
    return text + (
        f" (nccl-tests {theirs[key]:.3f} ms, {mine[key] / theirs[key]:.2f}x)" if theirs.get(key) else ""
    )
