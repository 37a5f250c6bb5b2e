"""Read one PCI function's configuration space, as the bytes /sys/bus/pci/devices/*/config gives them.

Offsets and bit numbers are the specifications': the PCI Local Bus Specification 3.0 (section 6.1, the header every
function has; 6.7, the capability list) and the PCI Express Base Specification 6.0 (7.5.3, the PCI Express capability;
7.6.3, the extended capability list; 7.7.8, Access Control Services). Everything is little-endian. A short or damaged
image never raises: what is not there reads as absent.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

CONVENTIONAL_SIZE, EXTENDED_SIZE = 256, 4096  # PCI config space; PCIe adds 4 KB in all (PCIe 6.0, 7.2.2)
UNPRIVILEGED_SIZE = (
    64  # what Linux gives a reader without CAP_SYS_ADMIN (drivers/pci/pci-sysfs.c, pci_read_config)
)

VENDOR_ID, DEVICE_ID, STATUS, CLASS_CODE, HEADER_TYPE, CAPABILITIES_POINTER = (
    0x00,
    0x02,
    0x06,
    0x09,
    0x0E,
    0x34,
)
STATUS_CAPABILITIES_LIST = 1 << 4  # Status register bit 4: a capability list starts at 34h (PCI 3.0, 6.2.3)
CAP_ID_PCI_EXPRESS = 0x10  # PCIe 6.0, 7.5.3.1
EXTENDED_START = 0x100  # the first extended capability header (PCIe 6.0, 7.6.3)
EXT_CAP_ID_ACS = 0x000D  # PCIe 6.0, 7.7.8.1

# PCI Express Capabilities Register (capability + 02h) bits 7:4, Device/Port Type (PCIe 6.0, 7.5.3.2)
PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy endpoint",
    0x4: "root port",
    0x5: "switch upstream port",
    0x6: "switch downstream port",
    0x7: "PCIe-to-PCI bridge",
    0x8: "PCI-to-PCIe bridge",
    0x9: "root complex integrated endpoint",
    0xA: "root complex event collector",
}

# ACS Capability (ACS + 04h) and ACS Control (ACS + 06h) registers: the same bit for the same feature (PCIe 6.0,
# 7.7.8.2 and 7.7.8.3), named here as lspci names them in ACSCap/ACSCtl.
ACS_BITS = {
    "src_valid": 0,
    "trans_blk": 1,
    "req_redir": 2,
    "cmplt_redir": 3,
    "upstream_fwd": 4,
    "egress_ctrl": 5,
    "direct_trans": 6,
}
LSPCI_NAMES = {
    "src_valid": "SrcValid",
    "trans_blk": "TransBlk",
    "req_redir": "ReqRedir",
    "cmplt_redir": "CmpltRedir",
    "upstream_fwd": "UpstreamFwd",
    "egress_ctrl": "EgressCtrl",
    "direct_trans": "DirectTrans",
}


class Config(NamedTuple):
    """What a configuration space image says, as far as its bytes go."""

    size: int  # bytes read
    vendor_id: int | None
    device_id: int | None
    class_code: int | None  # base class, subclass, programming interface: 0x060400 is a PCI-to-PCI bridge
    header_layout: int | None  # header type bits 6:0: 0 a function, 1 a PCI-to-PCI bridge
    port_type: str | None  # from the PCI Express capability; None where it is not in the bytes read
    # where the ACS extended capability starts; None where there is none or it was not read
    acs_offset: int | None
    acs_capability: int | None
    acs_control: int | None


def _u8(data: bytes, offset: int) -> int | None:
    return data[offset] if offset < len(data) else None


def _u16(data: bytes, offset: int) -> int | None:
    return struct.unpack_from("<H", data, offset)[0] if offset + 2 <= len(data) else None


def _u32(data: bytes, offset: int) -> int | None:
    return struct.unpack_from("<I", data, offset)[0] if offset + 4 <= len(data) else None


def capabilities(data: bytes) -> list[tuple[int, int]]:
    """The (ID, offset) of every capability in the list that starts at 34h (PCI 3.0, 6.7): each entry is its ID
    byte, then the next entry's offset (its low two bits reserved), 0 ending the list."""
    status = _u16(data, STATUS)
    pointer = _u8(data, CAPABILITIES_POINTER)
    if status is None or pointer is None or status == 0xFFFF or not status & STATUS_CAPABILITIES_LIST:
        return []
    found: list[tuple[int, int]] = []
    offset, seen = pointer & 0xFC, set()
    while 0x40 <= offset < CONVENTIONAL_SIZE and offset not in seen:  # entries live past the 64-byte header
        seen.add(offset)
        cap_id, following = _u8(data, offset), _u8(data, offset + 1)
        if cap_id is None or following is None:
            break
        found.append((cap_id, offset))
        offset = following & 0xFC
    return found


def extended_capabilities(data: bytes) -> list[tuple[int, int, int]]:
    """The (ID, version, offset) of every extended capability from 100h on (PCIe 6.0, 7.6.3): a 32-bit header of
    ID (bits 15:0), version (19:16) and the next header's offset (31:20), 0 ending the list."""
    found: list[tuple[int, int, int]] = []
    offset, seen = EXTENDED_START, set()
    while EXTENDED_START <= offset < EXTENDED_SIZE and offset not in seen:
        seen.add(offset)
        header = _u32(data, offset)
        if header is None or header in (0, 0xFFFFFFFF):  # not read, or no extended capabilities at all
            break
        found.append((header & 0xFFFF, (header >> 16) & 0xF, offset))
        offset = (header >> 20) & 0xFFC
    return found


def parse(data: bytes) -> Config:
    """The facts of one configuration space image (all of it, or the first 64 or 256 bytes)."""
    vendor = _u16(data, VENDOR_ID)
    present = vendor is not None and vendor != 0xFFFF
    port_type = None
    for cap_id, offset in capabilities(data) if present else []:
        if cap_id == CAP_ID_PCI_EXPRESS:
            flags = _u16(data, offset + 2)
            port_type = (
                None if flags is None else PORT_TYPES.get((flags >> 4) & 0xF, f"type {(flags >> 4) & 0xF}")
            )
            break
    acs = (
        next((offset for cap_id, _, offset in extended_capabilities(data) if cap_id == EXT_CAP_ID_ACS), None)
        if present
        else None
    )
    class_bytes = data[CLASS_CODE : CLASS_CODE + 3] if len(data) >= CLASS_CODE + 3 else b""
    header = _u8(data, HEADER_TYPE)
    return Config(
        size=len(data),
        vendor_id=vendor if present else None,
        device_id=_u16(data, DEVICE_ID) if present else None,
        class_code=int.from_bytes(class_bytes, "little") if present and class_bytes else None,
        header_layout=header & 0x7F if present and header is not None else None,
        port_type=port_type,
        acs_offset=acs,
        acs_capability=_u16(data, acs + 4) if acs is not None else None,
        acs_control=_u16(data, acs + 6) if acs is not None else None,
    )


def acs_flags(register: int) -> dict[str, bool]:
    """Each ACS feature's bit in an ACS Capability or Control register, by its lspci name."""
    return {name: bool(register >> bit & 1) for name, bit in ACS_BITS.items()}
