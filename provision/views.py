"""One render function per result: JSON for machines, rich tables for people."""

from __future__ import annotations

from provision import ui
from provision.machine import MachineFacts


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

    return " ".join(f"{k}x{v}" for k, v in sorted(counts.items(), key=lambda kv: order(kv[0]))) or "-"


def scan(result: object, as_json: bool) -> None:
    from provision.scan import ScanResult

    assert isinstance(result, ScanResult)
    if as_json:
        ui.dump_json(result.to_dict())
        return
    out = ui.console()
    columns = ["package", "files", "cubins (label x count)", "PTX"] + [f"runs on {cc}" for cc in result.require]
    packages = ui.table(f"CUDA code in {result.scanned} files ({result.seconds:.2f} s)", *columns)
    for p in result.packages:
        verdicts = [ui.status_text(p.verdicts[cc][0]) for cc in result.require]
        packages.add_row(p.name or "(no package)", str(p.files), _labels(dict(p.counts.cubin)),
                         _labels(dict(p.counts.ptx)), *verdicts)
    out.print(packages)
    for p in result.packages:
        for cc, (status, reason) in p.verdicts.items():
            if status != "pass":
                out.print(f"{status.upper()} {p.name or '(no package)'} on {cc}: {reason}")
    for note in result.notes:
        out.print(f"note: {note}")
