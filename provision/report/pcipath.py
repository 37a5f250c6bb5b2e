"""What the probe's PCI facts say about peer-to-peer between GPUs over PCIe: which bridges between two GPUs redirect
peer requests up to the root complex (ACS), and which GPUs' DMA an IOMMU translates; each said with what to change.
The `p2p` and `custom-allreduce` gates (report/gates.py) and the checks' view of them (report/observed.py) use it."""

from __future__ import annotations

from dataclasses import dataclass, field

from provision import knowledge
from provision.machine import pciconfig
from provision.machine.facts import Bridge, Link, MachineFacts

# nvidia-smi topo -m: the pair meets in a host bridge or across CPUs
ROOT_COMPLEX_LINKS = (
    "PHB",
    "NODE",
    "SYS",
)
SHOWN = 4  # bridges described in a reason; every one is named in the setpci line


@dataclass(frozen=True)
class Findings:
    read: bool  # the PCI facts were read (a probe from before them, or without sysfs, has none)
    # bridge -> the GPU pairs whose path it is on
    redirecting: dict[str, list[str]] = field(default_factory=dict)
    bridges: dict[str, Bridge] = field(default_factory=dict)
    translated: list[int] = field(default_factory=list)  # GPUs of PCIe pairs whose DMA an IOMMU translates
    domains: list[str] = field(default_factory=list)
    # pairs whose peer writes reach the root complex's IOMMU
    via_iommu: list[str] = field(default_factory=list)
    # bridges on the pairs' paths whose ACS bits only root can read
    unread: list[str] = field(default_factory=list)
    above: dict[str, list[int]] = field(default_factory=dict)  # bridge -> the GPUs below it

    @property
    def problems(self) -> list[str]:
        return [text for text in (self.acs_text(), self.iommu_text()) if text]

    def acs_text(self) -> str:
        if not self.redirecting:
            return ""
        names = sorted(self.redirecting)
        shown = [f"{bdf} ({self._describe(bdf)})" for bdf in names[:SHOWN]]
        more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
        return (
            f"ACS on {len(names)} PCI bridge(s) between GPUs redirects their peer traffic up to the root complex: "
            f"{'; '.join(shown)}{more}. Clear it as root: for b in {' '.join(names)}; do setpci -s $b "
            "ECAP_ACS+0x6.w=0000; done (lost at reboot; at boot: pci=disable_acs_redir= and the same addresses, "
            "';'-separated; or ACS / VT-d off in the BIOS)"
        )

    def iommu_text(self) -> str:
        if not self.translated:
            return ""
        gpus = ", ".join(str(g) for g in self.translated)
        return (
            f"the IOMMU translates the DMA of GPU {gpus} ({', '.join(self.domains)} domain): peer writes that reach "
            "it can be dropped or stall where it holds no mapping of the peer's memory. Boot with iommu=pt "
            "(passthrough), or with the IOMMU off (intel_iommu=off / amd_iommu=off)"
        )

    def _describe(self, bdf: str) -> str:
        bridge = self.bridges[bdf]
        acs = bridge.acs
        bits = " ".join(f"{pciconfig.LSPCI_NAMES[name]}+" for name in (acs.redirects if acs else []))
        control = f"ACSCtl 0x{acs.control:04x}: {bits}" if acs else "ACS"
        above = self.above.get(bdf, [])
        where = f" above GPU {', '.join(str(g) for g in above)}" if above else ""
        return f"{bridge.port_type or 'bridge'}{where}, {control}"


def findings(facts: MachineFacts) -> Findings:
    """The ACS and IOMMU facts on the paths between every pair of GPUs that PCIe joins (NVLink pairs left out)."""
    pci = facts.pci
    if not pci.read:
        return Findings(read=False)
    redirect_bits = knowledge.gate("pcie_p2p")["acs_redirect_bits"]
    bridges = {b.bdf: b for b in pci.bridges}
    pairs = [link for link in facts.topology if not link.link.startswith("NV")]
    redirecting: dict[str, list[str]] = {}
    unread: list[str] = []
    for link in pairs:
        for bdf in link.bridges:
            bridge = bridges.get(bdf)
            if bridge is None:
                continue
            if bridge.acs is not None and any(getattr(bridge.acs, bit) for bit in redirect_bits):
                redirecting.setdefault(bdf, []).append(f"{link.gpu_a}-{link.gpu_b}")
            elif 0 < bridge.config_bytes < 256 and bdf not in unread:  # 64 bytes: read without root
                unread.append(bdf)
    paths = {g.gpu: g for g in pci.gpus}
    translated = sorted(
        {
            g
            for link in pairs
            for g in (link.gpu_a, link.gpu_b)
            if g in paths and paths[g].iommu == "translated"
        }
    )
    via_iommu = [
        f"{link.gpu_a}-{link.gpu_b}"
        for link in pairs
        if {link.gpu_a, link.gpu_b} & set(translated) and _reaches_root(link, redirecting)
    ]
    return Findings(
        read=True,
        redirecting=redirecting,
        bridges=bridges,
        translated=translated,
        domains=sorted({paths[g].iommu_domain or "?" for g in translated}),
        via_iommu=via_iommu,
        unread=unread,
        above={bdf: [g.gpu for g in pci.gpus if bdf in g.bridges] for bdf in bridges},
    )


def _reaches_root(link: Link, redirecting: dict[str, list[str]]) -> bool:
    """Whether the pair's peer traffic goes up to the root complex: they meet only there, or ACS sends it there."""
    return link.link in ROOT_COMPLEX_LINKS or any(bdf in redirecting for bdf in link.bridges)
