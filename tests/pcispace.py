"""PCI configuration space images built by the specifications, for the tests and for the hand-written 8-GPU machine.

Layout (PCI Local Bus 3.0, 6.1; PCI Express Base 6.0, 7.5.3, 7.6.3, 7.7.8): vendor and device ID at 00h, Status at 06h
(bit 4: a capability list), class code at 09h-0Bh, header type at 0Eh, the capability pointer at 34h. The list here
is a Power Management capability (ID 01h) at 40h, then the PCI Express capability (ID 10h) at 60h whose Capabilities
Register (+02h) holds the port type in bits 7:4. Extended capabilities from 100h: Advanced Error Reporting (ID 0001h)
first, then ACS (ID 000Dh) with its Capability (+04h) and Control (+06h) registers, as real bridges order them.

`python tests/pcispace.py` prints the hand-written machine's sysfs answers (the `sysfs` list of
tests/data/rtx-pro-6000-x8.nvml.json).
"""

from __future__ import annotations

import json
import struct

BRIDGE_CLASS = 0x060400  # base class 06h bridge, subclass 04h PCI-to-PCI
ROOT_PORT, SWITCH_UPSTREAM, SWITCH_DOWNSTREAM, ENDPOINT = 0x4, 0x5, 0x6, 0x0
AER_AT, ACS_AT = 0x100, 0x148


def image(
    vendor: int,
    device: int,
    *,
    class_code: int = BRIDGE_CLASS,
    layout: int = 1,
    port_type: int | None = None,
    acs: tuple[int, int] | None = None,
    size: int = 4096,
) -> bytes:
    """A configuration space of `size` bytes; `acs` is (ACS Capability, ACS Control)."""
    data = bytearray(size)
    struct.pack_into("<HH", data, 0x00, vendor, device)
    data[0x09:0x0C] = class_code.to_bytes(3, "little")
    data[0x0E] = layout
    if port_type is not None:
        struct.pack_into("<H", data, 0x06, 0x0010)  # Status: Capabilities List
        data[0x34] = 0x40
        data[0x40:0x42] = bytes([0x01, 0x60])  # Power Management, next at 60h
        data[0x60:0x62] = bytes([0x10, 0x00])  # PCI Express, end of list
        struct.pack_into("<H", data, 0x62, (port_type << 4) | 0x2)  # capability version 2
    if acs is not None:
        struct.pack_into("<I", data, AER_AT, 0x0001 | 2 << 16 | ACS_AT << 20)  # AER v2, next: ACS
        struct.pack_into("<I", data, ACS_AT, 0x000D | 1 << 16)  # ACS v1, end of list
        struct.pack_into("<HH", data, ACS_AT + 4, *acs)
    return bytes(data)


def entry(op: str, path: str, result: object) -> dict[str, object]:
    """One recorded sysfs answer, as provision/machine/sysfs.py writes it."""
    if isinstance(result, bytes):
        return {"op": op, "path": path, "hex": result.rstrip(b"\0").hex(), "length": len(result)}
    return {"op": op, "path": path, "result": result}


# The hand-written 8 x RTX PRO 6000 machine: two sockets of four GPUs, each GPU behind its own PCIe Gen5 switch
# (Broadcom PEX890xx, 1000:c030) on its own root port of its own root bus (so NVML says NODE within a socket, SYS
# across), Intel root ports (8086:352a). The kernel runs the IOMMU in passthrough (intel_iommu=on iommu=pt), and
# Linux, as it does whenever an IOMMU is on, set ACS Source Validation, P2P Request and Completion Redirect and
# Upstream Forwarding (ACSCtl 0x001d) on every root port and switch downstream port: the common state of such servers.
ROOT_PORT_ACS = (0x001F, 0x001D)  # ACSCap: SrcValid TransBlk ReqRedir CmpltRedir UpstreamFwd
SWITCH_PORT_ACS = (0x007F, 0x001D)  # ACSCap: those and EgressCtrl DirectTrans
RTX_CMDLINE = (
    b"BOOT_IMAGE=/vmlinuz-6.8.0-60-generic root=/dev/mapper/vg0-root ro intel_iommu=on iommu=pt quiet\n"
)


def rtx_pro_6000_x8_sysfs() -> list[dict[str, object]]:
    entries = [
        entry("read", "/proc/cmdline", RTX_CMDLINE),
        entry("listdir", "/sys/class/iommu", [f"dmar{n}" for n in range(12)]),
        entry("listdir", "/sys/kernel/iommu_groups", sorted(str(n) for n in range(96))),
    ]
    configs = []
    for index in range(8):
        gpu_bus = 0x18 + 0x10 * index
        root, upstream, downstream = (
            f"0000:{gpu_bus - 3:02x}:01.0",
            f"0000:{gpu_bus - 2:02x}:00.0",
            f"0000:{gpu_bus - 1:02x}:00.0",
        )
        gpu, group = f"0000:{gpu_bus:02x}:00.0", 40 + index
        path = f"/sys/devices/pci0000:{gpu_bus - 3:02x}/{root}/{upstream}/{downstream}/{gpu}"
        entries += [
            entry("resolve", f"/sys/bus/pci/devices/{gpu}", path),
            entry("resolve", f"/sys/bus/pci/devices/{gpu}/iommu_group", f"/sys/kernel/iommu_groups/{group}"),
            entry("read", f"/sys/kernel/iommu_groups/{group}/type", b"identity\n"),
        ]
        configs += [
            entry(
                "read",
                f"/sys/bus/pci/devices/{root}/config",
                image(0x8086, 0x352A, port_type=ROOT_PORT, acs=ROOT_PORT_ACS),
            ),
            entry(
                "read",
                f"/sys/bus/pci/devices/{upstream}/config",
                image(0x1000, 0xC030, port_type=SWITCH_UPSTREAM),
            ),
            entry(
                "read",
                f"/sys/bus/pci/devices/{downstream}/config",
                image(0x1000, 0xC030, port_type=SWITCH_DOWNSTREAM, acs=SWITCH_PORT_ACS),
            ),
        ]
    return entries + sorted(configs, key=lambda e: str(e["path"]))


if __name__ == "__main__":
    print(json.dumps(rtx_pro_6000_x8_sysfs(), indent=1))
