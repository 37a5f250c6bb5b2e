"""The PCI facts that decide peer-to-peer between GPUs: where each GPU hangs in the PCI tree, the ACS control bits of
every bridge above it, and whether an IOMMU translates its DMA. Read from sysfs and /proc/cmdline through a `Files`
(machine/sysfs.py), so that a recording replays the same facts. Never raises: what cannot be read is a note.

The IOMMU, per GPU, is what Linux attached to it: a GPU in an IOMMU group whose domain is `identity` is passed through,
one whose domain is `DMA`/`DMA-FQ` is translated, and a GPU in no group has no IOMMU between it and memory ("off"),
whatever the kernel's boot line `iommu: Default domain type: Translated` says: that line names the domain a device
would get if an IOMMU unit were attached to it (drivers/iommu/iommu.c, iommu_subsys_init), and prints on machines
without any.
"""

from __future__ import annotations

import os
import re

from provision.machine import pciconfig
from provision.machine.facts import Acs, Bridge, GpuPath, Iommu, Pci
from provision.machine.sysfs import Files

DEVICES = "/sys/bus/pci/devices"
IOMMU_UNITS, IOMMU_GROUPS, CMDLINE = "/sys/class/iommu", "/sys/kernel/iommu_groups", "/proc/cmdline"
# domain:bus:device.function, sysfs spelling
ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# /sys/kernel/iommu_groups/N/type (Documentation/ABI/testing/sysfs-kernel-iommu_groups)
DOMAINS = {
    "identity": "passthrough",
    "DMA": "translated",
    "DMA-FQ": "translated",
    "unmanaged": "translated",
    "blocked": "blocked",
}
# Kernel options that decide the IOMMU and ACS (Documentation/admin-guide/kernel-parameters.txt)
CMDLINE_OPTIONS = ("intel_iommu=", "amd_iommu=", "iommu=", "iommu.", "pci=", "pcie_acs_override=")


def sysfs_address(bus_id: str) -> str | None:
    """NVML's "00000000:18:00.0" as sysfs names it, "0000:18:00.0"; None for anything else."""
    match = re.fullmatch(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", bus_id.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def read(
    files: Files, bus_ids: list[tuple[int, str | None]], virtualization: str | None = None
) -> tuple[Pci, list[str]]:
    """The PCI facts of the GPUs given as (NVML index, NVML bus id), and notes."""
    notes: list[str] = []
    cmdline = _cmdline(files)
    units, groups = _listing(files, IOMMU_UNITS), _listing(files, IOMMU_GROUPS)
    gpus = [_gpu(files, index, bus_id, cmdline) for index, bus_id in bus_ids]
    if bus_ids and all(g.sysfs_path is None for g in gpus):
        notes.append(
            f"PCI facts not read: no GPU found under {DEVICES} (no sysfs here, or a recording without it)"
        )
        return Pci(read=False, iommu=Iommu(cmdline=cmdline), gpus=tuple(gpus)), notes
    addresses = sorted({bdf for g in gpus for bdf in g.bridges})
    bridges = [_bridge(files, bdf) for bdf in addresses]
    unread = [b.bdf for b in bridges if 0 < b.config_bytes < pciconfig.CONVENTIONAL_SIZE]
    if unread:
        notes.append(
            f"the ACS bits of {len(unread)} PCI bridge(s) above the GPUs ({', '.join(unread[:4])}"
            f"{', ...' if len(unread) > 4 else ''}) lie in extended configuration space, which Linux lets only "
            "root read (CAP_SYS_ADMIN: a container needs it too): run the probe as root (sudo provision probe)"
        )
    failed = [b.bdf for b in bridges if b.config_bytes == 0]
    if failed:
        notes.append(
            f"the configuration space of {', '.join(failed)} could not be read ({DEVICES}/BDF/config)"
        )
    if virtualization and bus_ids:
        notes.append(
            f"a virtual machine ({virtualization}): the PCI tree and IOMMU read here are the guest's; the host's "
            "own ACS and IOMMU settings, which decide P2P between passed-through GPUs, cannot be read from inside"
        )
    return Pci(
        read=True, iommu=_iommu(gpus, units, groups, cmdline), gpus=tuple(gpus), bridges=tuple(bridges)
    ), notes


def pair_path(a: GpuPath, b: GpuPath) -> tuple[str, ...]:
    """The bridges between two GPUs as Linux's p2pdma walks them (drivers/pci/p2pdma.c, calc_map_type_and_dist): up
    from the first to the nearest bridge above both, that one included, then down to the second. Empty where the two
    share no bridge (they meet in the root complex) or either was not found."""
    common = 0
    while common < min(len(a.bridges), len(b.bridges)) and a.bridges[common] == b.bridges[common]:
        common += 1
    shared = (a.bridges[common - 1],) if common else ()
    return tuple(reversed(a.bridges[common:])) + shared + b.bridges[common:]


def _cmdline(files: Files) -> tuple[str, ...]:
    try:
        words = files.read(CMDLINE).decode("utf-8", "replace").split()
    except OSError:
        return ()
    if "--" in words:  # what follows is init's, not the kernel's
        words = words[: words.index("--")]
    return tuple(
        w for w in words if w.startswith(CMDLINE_OPTIONS) and (not w.startswith("pci=") or "acs" in w)
    )


def _listing(files: Files, path: str) -> list[str] | None:
    try:
        return files.listdir(path)
    except OSError:
        return None


def _gpu(files: Files, index: int, bus_id: str | None, cmdline: tuple[str, ...] = ()) -> GpuPath:
    bdf = sysfs_address(bus_id or "")
    if bdf is None:
        return GpuPath(gpu=index)
    try:
        path = files.resolve(f"{DEVICES}/{bdf}")
    except OSError:
        return GpuPath(gpu=index, bdf=bdf)
    parts = [part for part in path.split("/") if ADDRESS.match(part)]
    group, domain, mode = None, None, "unknown"
    try:
        group_path = files.resolve(f"{DEVICES}/{bdf}/iommu_group")
        group = int(os.path.basename(group_path))
        domain = files.read(f"{group_path}/type", 64).decode("ascii", "replace").strip() or None
        mode = DOMAINS.get(domain or "", "unknown")
    except FileNotFoundError:
        # no group: the device is there and nothing translates its DMA; a group without a type file (kernels
        # before 5.6): the command line says what the default domain is
        mode = "off" if group is None else _default_domain(cmdline)
    except (OSError, ValueError):
        pass
    return GpuPath(
        gpu=index,
        bdf=bdf,
        sysfs_path=path,
        bridges=tuple(parts[:-1]),
        iommu_group=group,
        iommu_domain=domain,
        iommu=mode,
    )


def _default_domain(cmdline: tuple[str, ...]) -> str:
    """What the kernel's options make of a device's default domain (kernel-parameters.txt: iommu=pt, iommu=nopt,
    iommu.passthrough=0|1); "unknown" where they say nothing, as the build's own default is not read."""
    for option in reversed(cmdline):  # the last one given wins
        if option in ("iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on", "iommu.passthrough=y"):
            return "passthrough"
        if option in ("iommu=nopt", "iommu.passthrough=0", "iommu.passthrough=off", "iommu.passthrough=n"):
            return "translated"
    return "unknown"


def _bridge(files: Files, bdf: str) -> Bridge:
    try:
        data = files.read(f"{DEVICES}/{bdf}/config", pciconfig.EXTENDED_SIZE)
    except OSError:
        return Bridge(bdf=bdf)
    config = pciconfig.parse(data)
    acs = None
    if config.acs_capability is not None and config.acs_control is not None:
        acs = Acs(
            capability=config.acs_capability,
            control=config.acs_control,
            **pciconfig.acs_flags(config.acs_control),
        )
    return Bridge(
        bdf=bdf,
        vendor_id=_hex(config.vendor_id),
        device_id=_hex(config.device_id),
        port_type=config.port_type,
        config_bytes=len(data),
        acs=acs,
    )


def _hex(value: int | None) -> str | None:
    return None if value is None else f"{value:04x}"


def _iommu(
    gpus: list[GpuPath], units: list[str] | None, groups: list[str] | None, cmdline: tuple[str, ...]
) -> Iommu:
    found = [g for g in gpus if g.sysfs_path is not None]
    modes = sorted({g.iommu for g in found})
    listing = (
        f"{IOMMU_GROUPS}: {'unreadable' if groups is None else f'{len(groups)} group(s)'}, "
        f"{IOMMU_UNITS}: {', '.join(units) if units else 'no unit'}"
    )
    if not modes:
        mode, why = ("off" if units == [] and groups == [] else "unknown"), "no GPU read"
    elif len(modes) > 1:
        mode, why = "mixed", "; ".join(f"GPU {g.gpu}: {g.iommu}" for g in found)
    elif modes[0] == "off":
        mode, why = (
            "off",
            "no IOMMU group holds the GPUs, so nothing translates their DMA"
            + (
                " (no IOMMU unit is registered either: a kernel line 'Default domain type: Translated' then names the "
                "domain an attached device would get, not that any is attached)"
                if not units
                else ""
            ),
        )
    else:
        mode = modes[0]
        domains = sorted({g.iommu_domain or "type unreadable" for g in found})
        why = f"the GPUs' IOMMU groups {', '.join(str(g.iommu_group) for g in found)}: {', '.join(domains)}"
    options = f"; kernel options: {' '.join(cmdline)}" if cmdline else ""
    return Iommu(
        mode=mode,
        reason=f"{why}; {listing}{options}",
        units=tuple(units or ()),
        groups=None if groups is None else len(groups),
        cmdline=cmdline,
    )
