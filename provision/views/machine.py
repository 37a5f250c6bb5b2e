"""What reads machines and binaries, shown: probe, scan, report (tables, JSON, Markdown)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from provision.views import ui
from provision.views.render import Block, Line, Shown, Table, TableBuilder

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.machine.facts import MachineFacts
    from provision.report.fleet import FleetSummary
    from provision.report.gates import MachineReport
    from provision.scan.binaries import ScanResult


def probe(facts: MachineFacts) -> Shown:
    d, h = facts.driver, facts.host
    summary = TableBuilder("Machine", "field", "value")
    summary.add("driver", ui.dash(d.version) + (f" ({d.kernel_module} kernel module)" if d.kernel_module else ""))
    summary.add("CUDA the driver supports", ui.dash(d.cuda))
    summary.add("OS", f"{ui.dash(h.os)} {ui.dash(h.os_version)}, kernel {ui.dash(h.kernel)}, {ui.dash(h.arch)}")
    summary.add("glibc / Python", f"{ui.dash(h.glibc)} / {ui.dash(h.python)} ({ui.dash(h.python_path)})")
    if h.container or h.virtualization:
        summary.add("container / VM", f"{ui.dash(h.container)} / {ui.dash(h.virtualization)}")
    blocks: list[Block] = [summary.done()]
    if facts.gpus:
        gpus = TableBuilder("GPUs", "#", "name", "SM", "memory", "PCIe now (max)", "NVLink", "MIG", "persist")
        for g in facts.gpus:
            p = g.pcie
            gpus.add(
                str(g.index),
                g.name.removeprefix("NVIDIA "),
                f"{ui.dash(g.sm)} ({ui.dash(g.architecture)})",
                ui.gib(g.memory_total_bytes),
                f"Gen{ui.dash(p.gen_current)} x{ui.dash(p.width_current)} (Gen{ui.dash(p.gen_max)} x{ui.dash(p.width_max)})",
                str(g.nvlink_active_links) if g.nvlink_supported else "none",
                ui.dash(g.mig_mode),
                "on" if g.persistence_mode else ("off" if g.persistence_mode is False else "-"),
            )
        blocks.append(gpus.done())
    if facts.topology:
        blocks.append(_topology_matrix(facts))
    if facts.pci.read and facts.pci.gpus:
        blocks.append(_pci_paths(facts))
    if facts.toolkits:
        kits = TableBuilder("CUDA toolkits", "version", "path", "found by", "real SMs nvcc can target")
        for t in facts.toolkits:
            kits.add(t.full_version or t.version, t.path, ", ".join(t.found_by), " ".join(t.sms))
        blocks.append(kits.done())
    blocks += [Line(f"note: {note}") for note in facts.notes]
    return Shown(facts.to_dict(), blocks)


def _topology_matrix(facts: MachineFacts) -> Table:
    """The link between every pair, laid out as `nvidia-smi topo -m` does, with P2P read status marked."""
    count = len(facts.gpus)
    cells = {(i, i): "X" for i in range(count)}
    for link in facts.topology:
        mark = "" if link.p2p_read == "ok" else " !p2p"
        cells[(link.gpu_a, link.gpu_b)] = cells[(link.gpu_b, link.gpu_a)] = link.link + mark
    matrix = TableBuilder("Topology", "", *(f"GPU{i}" for i in range(count)),
                          caption="NV# = # NVLinks; PIX, PXB, PHB, NODE, SYS = PCIe paths as nvidia-smi topo -m names "
                                  "them; !p2p = no peer reads")
    for i in range(count):
        matrix.add(f"GPU{i}", *(cells.get((i, j), "?") for j in range(count)))
    return matrix.done()


def _pci_paths(facts: MachineFacts) -> Table:
    """Each GPU's bridges, root first, with their ACS redirect bits, and what the IOMMU does with its DMA."""
    bridges = {b.bdf: b for b in facts.pci.bridges}

    def bridge(bdf: str) -> str:
        found = bridges.get(bdf)
        if found is None or found.config_bytes == 0:
            return f"{bdf} (not read)"
        if found.config_bytes < 256:
            return f"{bdf} (ACS: needs root)"
        acs = found.acs
        state = "no ACS" if acs is None else (f"ACS redirect 0x{acs.control:04x}" if acs.redirects else "ACS no redirect")
        return f"{bdf} {found.port_type or 'bridge'}, {state}"

    table = TableBuilder(f"PCI paths (IOMMU: {facts.pci.iommu.mode})", "GPU", "address", "bridges, root first", "IOMMU",
                         caption=f"IOMMU: {facts.pci.iommu.reason}")
    for g in facts.pci.gpus:
        group = f"group {g.iommu_group} {g.iommu_domain or ''}".strip() if g.iommu_group is not None else "no group"
        table.add(str(g.gpu), ui.dash(g.bdf), "\n".join(bridge(b) for b in g.bridges) or "none (root bus)",
                  f"{g.iommu} ({group})")
    return table.done()


def _labels(counts: dict[str, int]) -> str:
    from provision.knowledge import parse_label

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
        out.print(f"Machine: {f.source} | driver {ui.dash(f.driver.version)} (CUDA {ui.dash(f.driver.cuda)}) | "
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
        lines.append(f"## {f.source}: driver {ui.dash(f.driver.version)} (CUDA {ui.dash(f.driver.cuda)}), "
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
