"""What reads machines and binaries, shown: probe, scan, report (tables, JSON, Markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision import knowledge
from provision.log import one_line
from provision.views import ui
from provision.views.render import Block, Line, Shown, Table, TableBuilder, Verdict

if TYPE_CHECKING:  # annotations only: rendering one result must not import every operation
    from provision.machine.facts import MachineFacts
    from provision.report.assemble import ReportResult
    from provision.report.gates import MachineReport
    from provision.scan.binaries import ScanResult
    from provision.status import Status


def probe(facts: MachineFacts) -> Shown:
    d, h = facts.driver, facts.host
    summary = TableBuilder("Machine", "field", "value")
    summary.add(
        "driver", ui.dash(d.version) + (f" ({d.kernel_module} kernel module)" if d.kernel_module else "")
    )
    summary.add("CUDA the driver supports", ui.dash(d.cuda))
    if d.nvml.state not in ("ok", "unknown"):  # why no GPU was read, and what to do
        summary.add("NVML", f"{d.nvml.state}{f' ({d.nvml.error})' if d.nvml.error else ''}: {d.nvml.reason}")
        summary.add("what to do", ui.dash(d.nvml.hint))
    summary.add(
        "OS", f"{ui.dash(h.os)} {ui.dash(h.os_version)}, kernel {ui.dash(h.kernel)}, {ui.dash(h.arch)}"
    )
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
    blocks += [Line(f"note: {one_line(note)}") for note in facts.notes]
    return Shown(facts.to_dict(), blocks)


def _topology_matrix(facts: MachineFacts) -> Table:
    """The link between every pair, laid out as `nvidia-smi topo -m` does, with P2P read status marked."""
    count = len(facts.gpus)
    cells = {(i, i): "X" for i in range(count)}
    for link in facts.topology:
        mark = "" if link.p2p_read == "ok" else " !p2p"
        cells[(link.gpu_a, link.gpu_b)] = cells[(link.gpu_b, link.gpu_a)] = link.link + mark
    matrix = TableBuilder(
        "Topology",
        "",
        *(f"GPU{i}" for i in range(count)),
        caption="NV# = # NVLinks; PIX, PXB, PHB, NODE, SYS = PCIe paths as nvidia-smi topo -m names "
        "them; !p2p = no peer reads",
    )
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
        state = (
            "no ACS"
            if acs is None
            else (f"ACS redirect 0x{acs.control:04x}" if acs.redirects else "ACS no redirect")
        )
        return f"{bdf} {found.port_type or 'bridge'}, {state}"

    table = TableBuilder(
        f"PCI paths (IOMMU: {facts.pci.iommu.mode})",
        "GPU",
        "address",
        "bridges, root first",
        "IOMMU",
        caption=f"IOMMU: {facts.pci.iommu.reason}",
    )
    for g in facts.pci.gpus:
        group = (
            f"group {g.iommu_group} {g.iommu_domain or ''}".strip()
            if g.iommu_group is not None
            else "no group"
        )
        table.add(
            str(g.gpu),
            ui.dash(g.bdf),
            "\n".join(bridge(b) for b in g.bridges) or "none (root bus)",
            f"{g.iommu} ({group})",
        )
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


def scan(result: ScanResult) -> Shown:
    """The packages found and their code; a line per verdict that is not PASS; exit 1 when one FAILs."""
    packages = TableBuilder(
        f"CUDA code in {result.scanned} files ({result.seconds:.2f} s)",
        "package",
        "files",
        "cubins (label:count)",
        "PTX",
        "relocatable (never loaded)",
        *[f"runs on {cc}" for cc in result.require],
    )
    for p in result.packages:
        relocatable = p.code.relocatable
        packages.add(
            _package(p.name, p.version),
            str(p.files),
            _labels(dict(p.counts.cubin)),
            _labels(dict(p.counts.ptx)),
            _labels(dict(relocatable.cubin + relocatable.ptx)),
            *(Verdict(p.verdicts[cc][0]) for cc in result.require),
        )
    blocks: list[Block] = [packages.done()]
    blocks += [
        Line(f"{status.upper()} {_package(p.name, p.version)} on {cc}: {reason}")
        for p in result.packages
        for cc, (status, reason) in p.verdicts.items()
        if status != "pass"
    ]
    blocks += [Line(f"note: {one_line(note)}") for note in result.notes]
    return Shown(result.to_dict(), blocks, exit_code=1 if result.failed else 0)


NO_GPU = (
    "No GPU was read here, so every GPU gate is SKIP. To judge a GPU machine from here, record it there with "
    "`provision probe --json > machine.json` and run `provision report --machine machine.json`; a hand-written "
    "example of an 8 x RTX PRO 6000 PCIe box: docs/machines/rtx-pro-6000-x8.probe.json"
)


def report(result: ReportResult) -> Shown:
    """Per machine: its verdicts, each target's stack gates and the feature gates; a fleet's summary comes first (one
    machine's own report says it all). Markdown carries every gate with its source."""
    from provision.views import fleet

    first = result.summary if result.summary.machines > 1 else None
    blocks: list[Block] = list(fleet.blocks(first)) if first else []
    markdown: list[Block] = list(fleet.markdown(first)) if first else []
    for m in result.machines:
        blocks += _machine_blocks(m)
        markdown += _machine_markdown(m)
    return Shown(result.to_dict(), blocks, markdown=markdown)


def _machine_blocks(m: MachineReport) -> list[Block]:
    f = m.facts
    gpus = ", ".join(sorted({f"{g.name.removeprefix('NVIDIA ')} ({g.sm})" for g in f.gpus})) or "no GPUs"
    blocks: list[Block] = [
        Line(
            f"Machine: {one_line(f.source)} | driver {ui.dash(f.driver.version)} (CUDA {ui.dash(f.driver.cuda)}) | "
            f"{len(f.gpus)} x {gpus}" + (" | PCIe only" if len(f.gpus) > 1 and f.pcie_only else "")
        )
    ]
    verdicts = TableBuilder(
        "Verdicts", "target", "CUDA", "stack verdict", "features to leave off", "features to turn on"
    )
    for t in m.targets:
        turn_on = [next(g.turn_on for g in t.gates if g.id == name) for name in t.features_on]
        verdicts.add(
            f"{t.kind} {t.name}",
            t.cuda,
            Verdict(t.verdict),
            ", ".join(t.features_off) or "-",
            ", ".join(f"{name} ({how})" for name, how in zip(t.features_on, turn_on, strict=True)) or "-",
        )
    blocks.append(verdicts.done())
    notes = [Line(f"note: {one_line(note)}") for note in f.notes]
    if not f.gpus:  # no gates table follows: each reason a verdict is not a PASS is said here, a line each
        why = [
            Line(f"{t.kind} {one_line(t.name)}: {g.status.upper()} {g.id}: {one_line(g.reason)}")
            for t in m.targets
            for g in t.gates
            if g.kind == "stack" and g.status in ("warn", "fail", "error")
        ]
        why += [
            Line(f"{t.kind} {one_line(t.name)}: {one_line(g.reason)}")
            for t in m.targets
            for g in t.gates
            if g.id == "lock-scan"
        ]
        if f.driver.nvml.silent:  # no machine without GPUs: its driver does not answer
            start = f.driver.nvml
            return [
                *blocks,
                *why,
                Line(
                    f"The NVIDIA driver does not answer ({start.state}): {start.reason}. "
                    f"What to do: {start.hint}"
                ),
                *notes,
            ]
        return [*blocks, *why, Line(NO_GPU), Line(f"knowledge as of {knowledge.as_of()}"), *notes]
    shown_features: list[tuple[str, Status, str]] = []
    for t in m.targets:
        stack = TableBuilder(f"{t.kind} {t.name}", "gate", "status", "reason")
        for g in t.gates:
            if g.kind == "stack":
                stack.add(g.title, Verdict(g.status), g.reason)
        blocks.append(stack.done())
        features = [g for g in t.gates if g.kind == "feature"]
        key = [(g.id, g.status, g.reason) for g in features]
        if features and key != shown_features:  # the same features under the next target are not shown twice
            table = TableBuilder(f"Features on this machine (with {t.name})", "feature", "status", "reason")
            for g in features:
                table.add(g.title, Verdict(g.status), g.reason)
            blocks.append(table.done())
            shown_features = key
    return [
        *blocks,
        Line(
            f"Sources for every verdict: provision report --markdown or --json; knowledge as of {knowledge.as_of()}"
        ),
        *notes,
    ]


def _machine_markdown(m: MachineReport) -> list[Block]:
    f = m.facts
    blocks: list[Block] = [
        Line(
            f"{f.source}: driver {ui.dash(f.driver.version)} (CUDA {ui.dash(f.driver.cuda)}), "
            f"{len(f.gpus)} GPU(s) {', '.join(sorted({g.sm or '?' for g in f.gpus}))}",
            heading=2,
        ),
        Line(f"knowledge as of {knowledge.as_of()}"),
    ]
    for t in m.targets:
        off = f"; features to leave off: {', '.join(t.features_off)}" if t.features_off else ""
        off += f"; features to turn on: {', '.join(t.features_on)}" if t.features_on else ""
        blocks.append(Line(f"{t.kind} `{t.name}` (CUDA {t.cuda}): **{t.verdict.upper()}**{off}", heading=3))
        gates = TableBuilder("", "gate", "kind", "status", "reason", "source")
        for g in t.gates:
            gates.add(g.title, g.kind, g.status.upper(), g.reason, g.source)
        blocks.append(gates.done())
    return blocks
