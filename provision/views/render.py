"""One render function per result: JSON for machines, rich tables for people."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from provision import status as statuses
from provision.views import ui

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.envs.lifecycle import CreateResult
    from provision.machine.facts import MachineFacts
    from provision.report.fleet import FleetSummary
    from provision.report.gates import MachineReport
    from provision.scan.binaries import ScanResult
    from provision.stacks.lock import LockResult
    from provision.stacks.newprofile import NewProfile
    from provision.stacks.profiles import Profile


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.1f} GiB" if value else "-"


def _dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def probe(facts: MachineFacts, as_json: bool) -> None:
    if as_json:
        ui.dump_json(facts.to_dict())
        return
    out = ui.console()
    d, h = facts.driver, facts.host
    summary = ui.table("Machine", "field", "value")
    summary.add_row("driver", _dash(d.version) + (f" ({d.kernel_module} kernel module)" if d.kernel_module else ""))
    summary.add_row("CUDA the driver supports", _dash(d.cuda))
    summary.add_row("OS", f"{_dash(h.os)} {_dash(h.os_version)}, kernel {_dash(h.kernel)}, {_dash(h.arch)}")
    summary.add_row("glibc / Python", f"{_dash(h.glibc)} / {_dash(h.python)} ({_dash(h.python_path)})")
    if h.container or h.virtualization:
        summary.add_row("container / VM", f"{_dash(h.container)} / {_dash(h.virtualization)}")
    out.print(summary)
    if facts.gpus:
        gpus = ui.table("GPUs", "#", "name", "SM", "memory", "PCIe now (max)", "NVLink", "MIG", "persist")
        for g in facts.gpus:
            p = g.pcie
            gpus.add_row(
                str(g.index),
                g.name.removeprefix("NVIDIA "),
                f"{_dash(g.sm)} ({_dash(g.architecture)})",
                _gib(g.memory_total_bytes),
                f"Gen{_dash(p.gen_current)} x{_dash(p.width_current)} (Gen{_dash(p.gen_max)} x{_dash(p.width_max)})",
                str(g.nvlink_active_links) if g.nvlink_supported else "none",
                _dash(g.mig_mode),
                "on" if g.persistence_mode else ("off" if g.persistence_mode is False else "-"),
            )
        out.print(gpus)
    if facts.topology:
        out.print(_topology_matrix(facts))
    if facts.toolkits:
        kits = ui.table("CUDA toolkits", "version", "path", "found by", "real SMs nvcc can target")
        for t in facts.toolkits:
            kits.add_row(t.full_version or t.version, t.path, ", ".join(t.found_by), " ".join(t.sms))
        out.print(kits)
    for note in facts.notes:
        out.print(f"note: {note}")


def _topology_matrix(facts: MachineFacts) -> object:
    """The link between every pair, laid out as `nvidia-smi topo -m` does, with P2P read status marked."""
    count = len(facts.gpus)
    cells = {(i, i): "X" for i in range(count)}
    for link in facts.topology:
        mark = "" if link.p2p_read == "ok" else " !p2p"
        cells[(link.gpu_a, link.gpu_b)] = cells[(link.gpu_b, link.gpu_a)] = link.link + mark
    matrix = ui.table("Topology", "", *(f"GPU{i}" for i in range(count)))
    for i in range(count):
        matrix.add_row(f"GPU{i}", *(cells.get((i, j), "?") for j in range(count)))
    matrix.caption = "NV# = # NVLinks; PIX, PXB, PHB, NODE, SYS = PCIe paths as nvidia-smi topo -m names them; !p2p = no peer reads"
    return matrix


def _labels(counts: dict[str, int]) -> str:
    from provision.compat import parse_label

    def order(label: str) -> tuple[int, int, str]:
        try:
            _, major, minor, suffix = parse_label(label)
            return (major, minor, suffix)
        except ValueError:
            return (999, 0, label)

    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=lambda kv: order(kv[0]))) or "-"


def _package(name: str | None, version: str | None) -> str:
    return f"{name} {version}" if name and version else name or "(no package)"


def scan(result: ScanResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.console()
    columns = ["package", "files", "cubins (label:count)", "PTX", "relocatable (never loaded)"]
    packages = ui.table(f"CUDA code in {result.scanned} files ({result.seconds:.2f} s)",
                        *columns, *[f"runs on {cc}" for cc in result.require])
    for p in result.packages:
        verdicts = [ui.status_text(p.verdicts[cc][0]) for cc in result.require]
        relocatable = p.code.relocatable
        packages.add_row(_package(p.name, p.version), str(p.files), _labels(dict(p.counts.cubin)),
                         _labels(dict(p.counts.ptx)), _labels(dict(relocatable.cubin + relocatable.ptx)), *verdicts)
    out.print(packages)
    for p in result.packages:
        for cc, (status, reason) in p.verdicts.items():
            if status != "pass":
                out.print(f"{status.upper()} {_package(p.name, p.version)} on {cc}: {reason}")
    for note in result.notes:
        out.print(f"note: {note}")


def profiles(items: Sequence[Profile], as_json: bool) -> None:
    if as_json:
        ui.dump_json({"profiles": [
            {"name": p.name, "cuda": p.cuda, "python": p.python, "description": p.description, "path": str(p.path),
             "indexes": list(p.indexes), "packages": [pk.requirement() for pk in p.packages],
             "content_hash": p.content_hash}
            for p in items]})
        return
    out = ui.table("Profiles", "name", "CUDA", "Python", "description", "path")
    for p in items:
        out.add_row(p.name, p.cuda, _dash(p.python), p.description, str(p.path))
    ui.console().print(out)


def new_profile(result: NewProfile, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.table(f"{result.path}: the stack {result.serving} pins (CUDA {result.cuda})", "package", "version", "index", "from")
    for pin in result.pins:
        extras = f"[{','.join(pin.extras)}]" if pin.extras else ""
        out.add_row(f"{pin.name}{extras}", pin.version or "any", pin.index, pin.why)
    ui.console().print(out)
    ui.info(f"metadata of {result.wheel} read by {result.metadata_from}; next: provision lock {result.path}")


def report(reports: Sequence[MachineReport], style: str, fleet_summary: FleetSummary | None = None) -> None:
    from provision.views import fleet

    if style == "json":
        head = {"summary": fleet_summary.to_dict()} if fleet_summary else {}
        ui.dump_json({**head, "machines": [m.to_dict() for m in reports]})
        return
    # the summary comes first for a fleet; one machine's own report says it all
    first = fleet_summary if fleet_summary is not None and fleet_summary.machines > 1 else None
    if style == "markdown":
        print("\n".join((fleet.markdown(first) if first else []) + [_report_markdown(reports)]))
        return
    if first:
        fleet.table(first)
    out = ui.console()
    for m in reports:
        f = m.facts
        gpus = ", ".join(sorted({f"{g.name.removeprefix('NVIDIA ')} ({g.sm})" for g in f.gpus})) or "no GPUs"
        out.print(f"Machine: {f.source} | driver {_dash(f.driver.version)} (CUDA {_dash(f.driver.cuda)}) | "
                  f"{len(f.gpus)} x {gpus}" + (" | PCIe only" if len(f.gpus) > 1 and f.pcie_only else ""))
        summary = ui.table("Verdicts", "target", "CUDA", "stack verdict", "features to leave off")
        for t in m.targets:
            summary.add_row(f"{t.kind} {t.name}", t.cuda, ui.status_text(t.verdict), ", ".join(t.features_off) or "-")
        out.print(summary)
        if not f.gpus:
            out.print("No GPU was read here, so every GPU gate is SKIP. To judge a GPU machine from here, record it there "
                      "with `provision probe --json > machine.json` and run `provision report --machine machine.json`; "
                      "a hand-written example of an 8 x RTX PRO 6000 PCIe box: docs/machines/rtx-pro-6000-x8.probe.json")
            for note in f.notes:
                out.print(f"note: {note}")
            continue
        shown_features: list[tuple[str, str, str]] = []
        for t in m.targets:
            gates = ui.table(f"{t.kind} {t.name}", "gate", "status", "reason")
            for g in t.gates:
                if g.kind == "stack":
                    gates.add_row(g.title, ui.status_text(g.status), g.reason)
            out.print(gates)
            features = [g for g in t.gates if g.kind == "feature"]
            key = [(g.id, g.status, g.reason) for g in features]
            if features and key != shown_features:
                table = ui.table(f"Features on this machine (with {t.name})", "feature", "status", "reason")
                for g in features:
                    table.add_row(g.title, ui.status_text(g.status), g.reason)
                out.print(table)
                shown_features = key
        out.print("Sources for every verdict: provision report --markdown or --json")
        for note in f.notes:
            out.print(f"note: {note}")


def _report_markdown(reports: Sequence[MachineReport]) -> str:
    lines = []
    for m in reports:
        f = m.facts
        lines.append(f"## {f.source}: driver {_dash(f.driver.version)} (CUDA {_dash(f.driver.cuda)}), "
                     f"{len(f.gpus)} GPU(s) {', '.join(sorted({g.sm or '?' for g in f.gpus}))}\n")
        for t in m.targets:
            off = f"; features to leave off: {', '.join(t.features_off)}" if t.features_off else ""
            lines.append(f"### {t.kind} `{t.name}` (CUDA {t.cuda}): **{t.verdict.upper()}**{off}\n")
            lines.append("| gate | kind | status | reason | source |")
            lines.append("| --- | --- | --- | --- | --- |")
            for g in t.gates:
                cells = [g.title, g.kind, g.status.upper(), g.reason, g.source]
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            lines.append("")
    return "\n".join(lines)


class progress:  # noqa: N801 - used as a context manager like a function
    """Show long steps as a spinner on stderr (never on stdout, never under --json or when not a terminal)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.status: Any = None

    def __enter__(self) -> Callable[[str], None]:
        import sys

        from provision import log

        self.quiet = self.quiet or log.level() < log.NORMAL
        if not self.quiet and sys.stderr.isatty():  # rich is loaded only when something is drawn
            self.status = ui.console(stderr=True).status("working")
            self.status.__enter__()
        return self.step

    def step(self, message: str) -> None:
        if self.status is not None:
            self.status.update(message)
        elif not self.quiet:
            ui.info(f"... {message}")

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)


def locked(result: LockResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    table = ui.table(f"{result.path} ({len(result.packages)} files, {result.seconds:.2f} s)", "package", "version", "index", "hash")
    for p in result.packages:
        table.add_row(p.name, p.version, p.index, "computed" if p.hash_source == "computed" else "from index")
    out = ui.console()
    out.print(table)
    if result.nightly:
        out.print(f"nightly date: {result.nightly} (every nightly package from that one date)")
    computed = [p.file for p in result.packages if p.hash_source == "computed"]
    if computed:
        out.print(f"hashed by provision (the index gives none): {', '.join(computed)}")


def now() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _size(value: object) -> str:
    if not isinstance(value, int):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"


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


def created(result: CreateResult, as_json: bool) -> None:
    if as_json:
        ui.dump_json(result.to_dict())
        return
    if result.checks:
        checks(result.name, result.checks, False)
    if result.passed:
        state = "and made it active" if result.activated else "(not activated)"
        ui.info(f"built {result.name} at {result.path} {state}; lock {result.lock}" + (" (reused)" if result.lock_reused else ""))
    else:
        ui.info(f"{result.name}: checks failed; the build was removed and the active environment is unchanged")


def environments(root: object, rows: list[dict[str, object]], as_json: bool, uv_cache: str = "") -> None:
    if as_json:
        ui.dump_json({"home": str(root), "uv_cache": uv_cache, "environments": rows})
        return
    table = ui.table(f"Environments in {root}", "", "name", "profile", "CUDA", "Python", "size", "built", "checks", "baseline")
    for r in rows:
        base = r.get("baseline") or {}
        figure = f"{base['figure']:.1f} {base['unit']}" if isinstance(base, dict) and base.get("figure") is not None else "-"
        table.add_row("*" if r["active"] else "", str(r["name"]) + (" (adopted)" if r["adopted"] else ""),
                      _dash(r["profile"]), _dash(r["cuda"]), _dash(r["python"]), _size(r["size_bytes"]),
                      str(r["created"] or "-")[:16], ui.status_text(str(r["check_status"])) if r["check_status"] else "-", figure)
    table.caption = f"* active; stable path: {root}/active/venv; uv's cache (UV_CACHE_DIR): {uv_cache or '-'}"
    ui.console().print(table)


def switched(previous: str | None, now_active: str, skipped: list[str], as_json: bool) -> None:
    if as_json:
        ui.dump_json({"previous": previous, "active": now_active, "skipped": skipped})
        return
    note = f" (skipped removed: {', '.join(skipped)})" if skipped else ""
    ui.info(f"active: {now_active} (was {previous or 'none'}){note}")


def baseline(record: dict[str, object], as_json: bool) -> None:
    if as_json:
        ui.dump_json(record)
        return
    ui.console().print(f"{record['name']}: {record['figure']:.2f} {record['unit']} ({record['better']} is better) "
                       f"on {record['machine']['summary']} in {record['seconds']} s")  # type: ignore[index]


def comparison(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        ui.dump_json(result)
        return
    rows = result["environments"]
    table = ui.table("Baselines", "environment", "figure", "runs", "when", "machine")
    for r in rows:  # type: ignore[attr-defined]
        table.add_row(r["name"], f"{r['figure']:.2f} {r['unit']}", str(r["runs"]), r["at"][:16], r["machine"])
    out = ui.console()
    out.print(table)
    change = result["change_percent"]
    if change is not None:
        verdict = "better" if result["improved"] else "worse"
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
