"""The configuration space parser, on images laid out by the specifications (tests/pcispace.py) and on real dumps of
this machine's PCI functions, against what lspci printed for the same functions."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pcispace
import pytest
from conftest import DATA, ROOT

from provision.machine import pciconfig

REAL = DATA / "pci"


def test_a_root_port_with_acs_reads_as_lspci_shows_it() -> None:
    data = pcispace.image(0x8086, 0x352A, port_type=pcispace.ROOT_PORT, acs=(0x001F, 0x001D))
    config = pciconfig.parse(data)
    assert (config.vendor_id, config.device_id, config.class_code) == (0x8086, 0x352A, 0x060400)
    assert config.header_layout == 1 and config.port_type == "root port"
    assert config.acs_offset == pcispace.ACS_AT and (config.acs_capability, config.acs_control) == (
        0x001F,
        0x001D,
    )
    # lspci -vvv of this image: ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
    assert pciconfig.acs_flags(0x001D) == {
        "src_valid": True,
        "trans_blk": False,
        "req_redir": True,
        "cmplt_redir": True,
        "upstream_fwd": True,
        "egress_ctrl": False,
        "direct_trans": False,
    }
    assert pciconfig.capabilities(data) == [(0x01, 0x40), (0x10, 0x60)]
    assert pciconfig.extended_capabilities(data) == [(0x0001, 2, 0x100), (0x000D, 1, 0x148)]


@pytest.mark.parametrize(
    ("port_type", "name"),
    [
        (pcispace.SWITCH_UPSTREAM, "switch upstream port"),
        (pcispace.SWITCH_DOWNSTREAM, "switch downstream port"),
        (pcispace.ENDPOINT, "endpoint"),
        (0x7, "PCIe-to-PCI bridge"),
    ],
)
def test_port_types(port_type: int, name: str) -> None:
    assert pciconfig.parse(pcispace.image(0x1000, 0xC030, port_type=port_type)).port_type == name


def test_what_a_reader_without_root_gets_has_no_port_type_and_no_acs() -> None:
    """Linux gives 64 bytes to a reader without CAP_SYS_ADMIN: the header, not the capabilities past it."""
    full = pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_DOWNSTREAM, acs=(0x007F, 0x001D))
    config = pciconfig.parse(full[: pciconfig.UNPRIVILEGED_SIZE])
    assert (config.vendor_id, config.device_id, config.size) == (0x1000, 0xC030, 64)
    assert config.port_type is None and config.acs_offset is None and config.acs_control is None
    # no extended space (conventional PCI, or a platform without ECAM)
    conventional = pciconfig.parse(full[:256])
    assert conventional.port_type == "switch downstream port" and conventional.acs_offset is None


def test_damaged_images_end_instead_of_looping_or_raising() -> None:
    data = bytearray(
        pcispace.image(0x10DE, 0x2BB5, class_code=0x030200, layout=0, port_type=pcispace.ENDPOINT, acs=(1, 1))
    )
    data[0x61] = 0x40  # the PCI Express capability points back at the first entry
    struct.pack_into("<I", data, 0x148, 0x000D | 1 << 16 | 0x100 << 20)  # ACS points back at AER
    assert pciconfig.capabilities(bytes(data)) == [(0x01, 0x40), (0x10, 0x60)]
    assert [offset for *_, offset in pciconfig.extended_capabilities(bytes(data))] == [0x100, 0x148]
    assert pciconfig.parse(b"").vendor_id is None and pciconfig.parse(b"\xff" * 4096).vendor_id is None
    # cut inside the capability: absent, no error
    assert pciconfig.parse(bytes(data[:0x62])).port_type is None


LSPCI_PORTS = {
    "Endpoint": "endpoint",
    "Legacy Endpoint": "legacy endpoint",
    "Root Port": "root port",
    "Upstream Port": "switch upstream port",
    "Downstream Port": "switch downstream port",
    "Root Complex Integrated Endpoint": "root complex integrated endpoint",
}
DUMPS = sorted(path for path in REAL.rglob("*.config") if path.with_suffix(".lspci.txt").exists())


@pytest.mark.parametrize("dump", DUMPS, ids=[str(p.relative_to(REAL)) for p in DUMPS])
def test_real_config_space_reads_as_lspci_read_it(dump: Path) -> None:
    """Real /sys/bus/pci/devices/*/config copied as root, beside `lspci -vvv -nn` of the same bytes (pciutils 3.9.0):
    the H200 machine's every function (h200-2026-12-01/: the GPU an Express endpoint with a null extended capability
    at 100h, as lspci also shows it; `lspci -F` over the dump, since that machine has no lspci) and this development
    machine's host bridge and a virtio function (`lspci -s`, live). IDs, every capability's offset (and an extended
    one's version), the port type and the ACS control bits must be what lspci printed."""
    data = dump.read_bytes()
    config = pciconfig.parse(data)
    lspci = dump.with_suffix(".lspci.txt").read_text()
    first = lspci.splitlines()[0]
    assert f"[{config.vendor_id:04x}:{config.device_id:04x}]" in first
    assert f"[{config.class_code >> 8:04x}]" in first  # lspci -nn prints base class and subclass
    theirs = [
        (int(offset, 16), int(version) if version else None)
        for offset, version in re.findall(r"Capabilities: \[([0-9a-f]+)(?: v(\d+))?\]", lspci)
    ]
    ours = [(offset, None) for _, offset in pciconfig.capabilities(data)] + [
        (offset, version) for _, version, offset in pciconfig.extended_capabilities(data)
    ]
    assert ours == theirs
    port = re.search(r"Express \(v\d\) ([A-Za-z ]+?)(?: \(|,)", lspci)
    assert config.port_type == (LSPCI_PORTS[port.group(1)] if port else None)
    control = re.search(r"ACSCtl:\s+(.*)", lspci)
    expected = (
        {name: f"{label}+" in control.group(1) for name, label in pciconfig.LSPCI_NAMES.items()}
        if control
        else None
    )
    assert (pciconfig.acs_flags(config.acs_control) if config.acs_control is not None else None) == expected


def test_the_h200s_dump_is_among_them() -> None:
    gpu = REAL / "h200-2026-12-01/0000_00_06.0.config"
    assert gpu in DUMPS and pciconfig.parse(gpu.read_bytes()).port_type == "endpoint"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.isdir("/sys/bus/pci/devices"),
    reason="needs root (to become another user), setpriv and /sys/bus/pci",
)
def test_linux_gives_a_reader_without_root_64_bytes_of_config_space() -> None:
    """What UNPRIVILEGED_SIZE stands for, asked of this machine's kernel: the same file read as root and as nobody."""
    device = sorted(os.listdir("/sys/bus/pci/devices"))[0]
    path = f"/sys/bus/pci/devices/{device}/config"
    # cat, not this Python: an interpreter under root's home (pyenv) may not load as nobody
    as_nobody = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", 'cat "$0" | wc -c', path],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert as_nobody.returncode == 0, as_nobody.stderr
    assert int(as_nobody.stdout) == pciconfig.UNPRIVILEGED_SIZE < len(Path(path).read_bytes())


def test_the_images_lspci_read_are_the_builders() -> None:
    """docs/evidence/local-2026-12-01-p2p: pciutils' lspci -F and setpci read these three images (the hand-written
    machine's bridges) as ACSCtl 0x001d on the root and downstream ports and no ACS on the upstream port."""
    text = (ROOT / "docs/evidence/local-2026-12-01-p2p/rtx-hand-written-bridges.lspci-x.txt").read_text()
    dumps: dict[str, bytearray] = {}
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] ", line):
            current = dumps.setdefault(line.split()[0], bytearray())
        elif re.match(r"^[0-9a-f]{3}: ", line):
            current += bytes.fromhex(line[5:])
    assert dumps == {
        "0000:15:01.0": pcispace.image(
            0x8086, 0x352A, port_type=pcispace.ROOT_PORT, acs=pcispace.ROOT_PORT_ACS
        ),
        "0000:16:00.0": pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_UPSTREAM),
        "0000:17:00.0": pcispace.image(
            0x1000, 0xC030, port_type=pcispace.SWITCH_DOWNSTREAM, acs=pcispace.SWITCH_PORT_ACS
        ),
    }
    assert (
        "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+"
        in (ROOT / "docs/evidence/local-2026-12-01-p2p/lspci-reads-the-hand-written-images.txt").read_text()
    )
