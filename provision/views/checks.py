"""Checks and measurements, shown: `check`, `baseline`, `compare`, `bench allreduce`."""

from __future__ import annotations

from provision import status as statuses
from provision.views import ui


def checks(name: str, results: list[dict[str, object]], as_json: bool) -> None:
    from provision.checks.runner import overall

    status = overall(results)
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("pass", "warn", "fail", "skip", "error")}
    if as_json:
        ui.dump_json({"environment": name, "status": status, "summary": {**counts, "total": len(results)}, "checks": results})
        return
    table = ui.table(f"Checks of {name}: {status.upper()}", "check", "status", "seconds", "reason")
    for r in results:
        table.add_row(str(r["id"]), ui.status_text(str(r["status"])), f"{r.get('seconds', 0):.1f}", str(r.get("reason", "")))
    out = ui.console()
    out.print(table)
    out.print(", ".join(f"{v} {k}" for k, v in counts.items() if v) + f" of {len(results)}")
    for r in results:
        if statuses.failed(r["status"]) and r.get("output_tail"):
            out.print(f"--- {r['id']} output (last lines) ---\n{r['output_tail']}")


def baseline(record: dict[str, object], as_json: bool) -> None:
    if as_json:
        ui.dump_json(record)
        return
    import statistics

    figures: list[float] = record.get("figures") or [record["figure"]]  # type: ignore[assignment]
    figure = statistics.median(figures)
    runs = f"median of {len(figures)} runs: {', '.join(f'{f:.2f}' for f in figures)}; " if len(figures) > 1 else ""
    ui.console().print(f"{record['name']}: {figure:.2f} {record['unit']} ({runs}{record['better']} is better) "
                       f"on {record['machine']['summary']}, last run {record['seconds']} s")  # type: ignore[index]


def comparison(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        ui.dump_json(result)
        return
    rows = result["environments"]
    table = ui.table("Baselines", "environment", "median", "spread (min - max)", "runs compared", "when", "machine")
    for r in rows:  # type: ignore[attr-defined]
        spread = f"{r['min']:.2f} - {r['max']:.2f}" if len(r["figures"]) > 1 else "- (one run: baseline --runs N)"
        table.add_row(r["name"], f"{r['median']:.2f} {r['unit']}", spread, str(len(r["figures"])), r["at"][:16], r["machine"])
    out = ui.console()
    out.print(table)
    change = result["change_percent"]
    if change is not None:
        verdict = "within noise: the spreads cover it" if result["within_noise"] else "better" if result["improved"] else "worse"
        out.print(f"{rows[1]['name']} vs {rows[0]['name']}: {change:+.1f}% ({verdict})")  # type: ignore[index]
    if not result["same_machine"]:
        out.print("note: the two baselines ran on different machines")
    for r in rows:  # type: ignore[attr-defined]
        if r["name"] in result["drifted"]:  # type: ignore[operator]
            out.print(f"note: {r['name']}'s baseline was measured on a drifted environment ({r['drift']['summary']}): "
                      f"provision check {r['name']} --only drift; provision restore {r['name']}")


def _beside_anchor(mine: dict[str, float], theirs: dict[str, float], key: str) -> str:
    text = f"{mine[key]:.3f} ms"
    return text + (f" (nccl-tests {theirs[key]:.3f} ms, {mine[key] / theirs[key]:.2f}x)" if theirs.get(key) else "")


def allreduce(record: dict[str, object], as_json: bool) -> None:
    """The table of nccl-tests' all_reduce_perf (in-place), eager and graph-captured; with nccl-tests' own figures from
    the same call beside each, their ratio and what torch.distributed adds per op."""
    if as_json:
        ui.dump_json(record)
        return
    lines = []
    for run in record["runs"]:  # type: ignore[attr-defined]
        variant = " ".join(f"{k}={v}" for k, v in run["variant"].items()) or "NCCL defaults"
        anchor = run.get("nccl_tests")
        lines.append(f"# {record['name']}: all_reduce sum float, {record['world_size']} rank(s), {record['backend']}, {variant}")
        if anchor and "error" in anchor:  # it hung or failed: provision's own figures stand alone
            lines.append(f"# nccl-tests {anchor['path']}: {anchor['error']}")
            anchor = None
        if anchor:
            lines.append(f"# beside nccl-tests {anchor['path']} (NCCL {anchor['nccl_library']}): 'nccl' is its in-place "
                         "time, 'x' provision/nccl-tests, '+torch' what torch.distributed adds per op")
        head, unit = f"# {'size':>10} {'count':>11}", f"# {'(B)':>10} {'(elements)':>11}"
        for kind in ("eager", "graph"):
            head += f" | {kind + ' (us)':>11} {'busbw':>7}" + (f" {'nccl':>7} {'x':>5} {'+torch':>7}" if anchor else "")
            unit += f" | {'':>11} {'(GB/s)':>7}" + (f" {'(us)':>7} {'':>5} {'(us)':>7}" if anchor else "")
        lines += [head + f" {'#wrong':>6}", unit]
        for row in run["rows"]:
            line = f"  {row['size']:>10} {row['count']:>11}"
            for kind in ("eager", "graph"):
                if f"{kind}_us" not in row:
                    line += f" | {'-':>11} {'-':>7}" + (f" {'-':>7} {'-':>5} {'-':>7}" if anchor else "")
                    continue
                line += f" | {row[f'{kind}_us']:11.2f} {row[f'{kind}_busbw']:7.2f}"
                if anchor:
                    line += (f" {row[f'nccl_tests_{kind}_us']:7.2f} {row[f'{kind}_ratio']:5.2f} {row[f'torch_overhead_{kind}_us']:7.2f}"
                             if f"nccl_tests_{kind}_us" in row else f" {'-':>7} {'-':>5} {'-':>7}")
            lines.append(line + f" {row['wrong']:>6}")
        pattern = run.get("pattern")
        if pattern:
            theirs = (anchor or {}).get("pattern", {})
            small, large = (_beside_anchor(pattern, theirs, key) for key in ("122x42KB_ms", "2x2.5MB_ms"))
            lines.append(f"# verify pass in one CUDA graph: 122 x 42 KB = {small}; 2 x 2.5 MB (same bytes, coalesced) = {large}")
            if "122x42KB_one_buffer_ms" in pattern:
                lines.append(f"# the 122 on one buffer: {pattern['122x42KB_one_buffer_ms']:.3f} ms")
        lines += [f"# note: {note}" for note in run.get("notes") or []]
        teardown = run.get("teardown") or []
        if any(t.get("clean") is False for t in teardown):
            lines.append("# teardown: " + "; ".join(t.get("note") or t.get("error") or "not clean" for t in teardown if t.get("clean") is False))
    print("\n".join(lines))
