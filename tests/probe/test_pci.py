"""The PCI facts of the probe (IOMMU, the bridges above each GPU and their ACS bits), recorded and replayed, and the
report's p2p and custom-allreduce gates that use them."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pcispace
import pytest
from conftest import DATA, ROOT
from launch import run_provision

from provision.errors import InputError
from provision.machine import facts as machine
from provision.machine import nvml, pci, pciconfig, probe, sysfs
from provision.records.details import NcclAllreduceDetails
from provision.records.results import CheckResult
from provision.report import documents, gates, observed

NCCL_ACS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs"
RTX_DOC = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def switch_pair(
    *, acs_control: int, domain: str | None, config_bytes: int = 4096, failing: str = ""
) -> sysfs.Replay:
    """Two GPUs behind one PCIe switch (NVML: PIX), on a root port; `domain` is their IOMMU groups' type, None for
    no IOMMU; the bridges' configuration space cut to `config_bytes` as Linux cuts it for a reader without root."""
    root, usp, dsp = "0000:00:01.0", "0000:01:00.0", ("0000:02:00.0", "0000:02:08.0")
    entries = [
        pcispace.entry("read", "/proc/cmdline", b"ro quiet intel_iommu=on -- init-arg iommu=pt\n"),
        pcispace.entry("listdir", "/sys/class/iommu", ["dmar0"] if domain else []),
        pcispace.entry("listdir", "/sys/kernel/iommu_groups", ["7", "8"] if domain else []),
    ]
    for n, gpu in enumerate(("0000:03:00.0", "0000:04:00.0")):
        entries.append(
            pcispace.entry(
                "resolve",
                f"/sys/bus/pci/devices/{gpu}",
                f"/sys/devices/pci0000:00/{root}/{usp}/{dsp[n]}/{gpu}",
            )
        )
        if domain:
            entries += [
                pcispace.entry(
                    "resolve", f"/sys/bus/pci/devices/{gpu}/iommu_group", f"/sys/kernel/iommu_groups/{7 + n}"
                ),
                pcispace.entry("read", f"/sys/kernel/iommu_groups/{7 + n}/type", f"{domain}\n".encode()),
            ]
    images = {
        root: pcispace.image(0x8086, 0x352A, port_type=pcispace.ROOT_PORT, acs=(0x1F, acs_control)),
        usp: pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_UPSTREAM),
        dsp[0]: pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_DOWNSTREAM, acs=(0x7F, acs_control)),
        dsp[1]: pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_DOWNSTREAM, acs=(0x7F, 0)),
    }
    entries += [
        pcispace.entry("read", f"/sys/bus/pci/devices/{bdf}/config", data[:config_bytes])
        if bdf != failing
        else {"op": "read", "path": f"/sys/bus/pci/devices/{bdf}/config", "error": errno.EIO}
        for bdf, data in images.items()
    ]
    return sysfs.Replay(entries)


def two_gpu_facts(files: sysfs.Files, link: str = "PIX") -> machine.MachineFacts:
    found, notes = pci.read(files, [(0, "00000000:03:00.0"), (1, "00000000:04:00.0")])
    path = pci.pair_path(found.gpus[0], found.gpus[1])
    gpu = {"name": "NVIDIA RTX PRO 6000", "compute_capability": "12.0", "sm": "sm_120"}
    return machine.MachineFacts(
        gpus=(machine.Gpu(index=0, **gpu), machine.Gpu(index=1, **gpu)),
        topology=(machine.Link(gpu_a=0, gpu_b=1, link=link, p2p_read="ok", bridges=path),),
        pci=found,
        notes=tuple(notes),
    )


def gate(facts: machine.MachineFacts, gate_id: str) -> gates.Gate:
    return next(g for g in gates.machine_gates(facts, None) if g.id == gate_id)


def test_the_path_between_two_gpus_is_p2pdmas_and_the_acs_bits_are_read() -> None:
    facts = two_gpu_facts(switch_pair(acs_control=0x001D, domain=None))
    assert facts.pci.read and facts.pci.iommu.mode == "off" and facts.pci.iommu.cmdline == ("intel_iommu=on",)
    assert facts.pci.gpus[0].bridges == ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0")
    # up from GPU 0 to the nearest bridge above both (the switch's upstream port, included), down to GPU 1
    assert facts.topology[0].bridges == ("0000:02:00.0", "0000:01:00.0", "0000:02:08.0")
    dsp = next(b for b in facts.pci.bridges if b.bdf == "0000:02:00.0")
    assert dsp.port_type == "switch downstream port" and dsp.vendor_id == "1000" and dsp.acs is not None
    assert (dsp.acs.control, dsp.acs.req_redir, dsp.acs.cmplt_redir, dsp.acs.egress_ctrl) == (
        0x1D,
        True,
        True,
        False,
    )
    assert dsp.acs.redirects == ["req_redir", "cmplt_redir"]


def test_acs_redirect_between_two_gpus_is_named_with_the_bridge_and_what_to_change() -> None:
    facts = two_gpu_facts(switch_pair(acs_control=0x001D, domain="identity"))
    p2p = gate(facts, "p2p")
    assert p2p.status == "warn" and NCCL_ACS in p2p.source
    assert (
        "0000:02:00.0 (switch downstream port above GPU 0, ACSCtl 0x001d: ReqRedir+ CmpltRedir+)"
        in p2p.reason
    )
    assert "setpci -s $b ECAP_ACS+0x6.w=0000" in p2p.reason and "for b in 0000:02:00.0;" in p2p.reason
    assert "0000:00:01.0" not in p2p.reason  # the root port is above both, not between them
    custom = gate(facts, "custom-allreduce")
    assert custom.status == "warn" and "root complex" in custom.reason  # passthrough: slow, not lost
    # SrcValid alone redirects nothing
    clear = two_gpu_facts(switch_pair(acs_control=0x0001, domain="identity"))
    assert gate(clear, "p2p").status == "pass" and gate(clear, "custom-allreduce").status == "pass"


def test_a_translated_iommu_with_acs_redirect_turns_the_custom_allreduce_off() -> None:
    facts = two_gpu_facts(switch_pair(acs_control=0x001D, domain="DMA-FQ"))
    assert facts.pci.iommu.mode == "translated" and facts.pci.gpus[1].iommu_group == 8
    p2p = gate(facts, "p2p")
    assert p2p.status == "warn" and "the IOMMU translates the DMA of GPU 0, 1 (DMA-FQ domain)" in p2p.reason
    assert "iommu=pt" in p2p.reason and "intel_iommu=off / amd_iommu=off" in p2p.reason
    custom = gate(facts, "custom-allreduce")
    assert (
        custom.status == "fail"
        and "--disable-custom-all-reduce" in custom.reason
        and "vllm#51513" in custom.reason
    )
    assert (
        "custom-allreduce"
        in gates.Target(
            kind="profile", name="x", cuda="13.0", gates=gates.machine_gates(facts, None)
        ).features_off
    )
    # translated, and no ACS redirect, but the two meet only in the root complex: the writes reach the IOMMU too
    node = two_gpu_facts(switch_pair(acs_control=0, domain="DMA"), link="NODE")
    assert gate(node, "custom-allreduce").status == "fail"
    # under one switch without redirect: they don't
    pix = two_gpu_facts(switch_pair(acs_control=0, domain="DMA"))
    custom = gate(pix, "custom-allreduce")
    assert custom.status == "warn" and "while ACS redirects nothing" in custom.reason


def test_without_root_the_acs_bits_are_a_note_that_says_root_reads_them() -> None:
    facts = two_gpu_facts(switch_pair(acs_control=0x001D, domain=None, config_bytes=64))
    assert all(b.acs is None and b.config_bytes == 64 and b.port_type is None for b in facts.pci.bridges)
    assert any("only root read" in note and "sudo provision probe" in note for note in facts.notes)
    p2p = gate(facts, "p2p")
    assert p2p.status == "pass" and "need root to read" in p2p.reason
    failed = two_gpu_facts(switch_pair(acs_control=0x001D, domain=None, failing="0000:02:00.0"))
    assert any("0000:02:00.0 could not be read" in note for note in failed.notes)
    assert not any("only root" in note for note in failed.notes)


def test_a_gpu_on_the_root_bus_of_a_vm_without_iommu_groups_is_off() -> None:
    """The H200 machine (shared readings of 2026-12-01): a microVM, the GPU at 0000:00:06.0 on the root bus, no bridge,
    /sys/class/iommu and /sys/kernel/iommu_groups empty, while its kernel log says 'Default domain type: Translated'."""
    files = sysfs.Replay(
        [
            pcispace.entry(
                "read",
                "/proc/cmdline",
                b"console=ttyS0 reboot=k panic=1 swiotlb=noforce pci=realloc=off -- --firecracker-init\n",
            ),
            pcispace.entry("listdir", "/sys/class/iommu", []),
            pcispace.entry("listdir", "/sys/kernel/iommu_groups", []),
            pcispace.entry(
                "resolve", "/sys/bus/pci/devices/0000:00:06.0", "/sys/devices/pci0000:00/0000:00:06.0"
            ),
        ]
    )
    found, notes = pci.read(files, [(0, "00000000:00:06.0")], virtualization="unknown hypervisor")
    assert found.gpus[0].bridges == () and found.gpus[0].iommu == "off" and found.bridges == ()
    assert found.iommu.mode == "off" and "Default domain type: Translated" in found.iommu.reason
    assert found.iommu.cmdline == ()  # pci=realloc=off is not about ACS
    assert any("the host's own ACS and IOMMU" in note for note in notes)


def test_the_live_reading_of_this_machine_matches_its_sysfs() -> None:
    """This machine's own sysfs, read for a PCI function that is there (no GPU here: the first function stands in)."""
    devices = sorted(os.listdir(pci.DEVICES)) if os.path.isdir(pci.DEVICES) else []
    if not devices:
        pytest.skip("no /sys/bus/pci here")
    found, _ = pci.read(sysfs.Live(), [(0, devices[0])])
    real = os.path.realpath(f"{pci.DEVICES}/{devices[0]}")
    assert found.read and found.gpus[0].sysfs_path == real
    assert found.gpus[0].bridges == tuple(p for p in real.split("/")[:-1] if pci.ADDRESS.match(p))
    groups = os.listdir(pci.IOMMU_GROUPS) if os.path.isdir(pci.IOMMU_GROUPS) else None
    assert found.iommu.groups == (len(groups) if groups is not None else None)
    assert found.gpus[0].iommu == (
        "off" if not os.path.exists(f"{real}/iommu_group") else found.gpus[0].iommu
    )


def test_recorder_and_replay_answer_alike_and_the_replay_invents_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_bytes(pcispace.image(0x1000, 0xC030, port_type=pcispace.SWITCH_DOWNSTREAM, acs=(0x7F, 0x1D)))
    (tmp_path / "link").symlink_to(config)
    recorder = sysfs.Recorder(sysfs.Live())
    assert recorder.read(str(config)) == config.read_bytes()
    assert recorder.resolve(str(tmp_path / "link")) == str(config)
    assert recorder.listdir(str(tmp_path)) == ["config", "link"]
    with pytest.raises(FileNotFoundError):
        recorder.resolve(str(tmp_path / "missing"))
    entries = json.loads(json.dumps(recorder.entries))
    # the zeros at the end are counted
    assert entries[0]["length"] == 4096 and len(entries[0]["hex"]) < 2 * 4096
    replay = sysfs.Replay(entries)
    assert (
        replay.read(str(config)) == config.read_bytes()
        and replay.read(str(config), 64) == config.read_bytes()[:64]
    )
    assert replay.resolve(str(tmp_path / "link")) == str(config) and replay.listdir(str(tmp_path)) == [
        "config",
        "link",
    ]
    with pytest.raises(FileNotFoundError):  # recorded as ENOENT
        replay.resolve(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):  # never asked: not there
        replay.read("/proc/cmdline")
    with pytest.raises(PermissionError):
        sysfs.Replay([{"op": "read", "path": "/x", "error": errno.EACCES}]).read("/x")
    for bad in (
        [{"op": "read", "path": "/x", "hex": "zz", "length": 1}],
        [{"op": "write", "path": "/x", "result": 1}],
        [{"op": "read", "path": "/x", "hex": "00", "length": 5000}],
        {"not": "a list"},
    ):
        with pytest.raises(sysfs.RecordingError):
            sysfs.Replay(bad)


def test_probe_records_its_sysfs_reads_and_a_replay_gives_the_same_facts(
    tmp_path: Path, provision_bin: str
) -> None:
    recording = tmp_path / "machine.nvml.json"
    live = run_provision("probe", "--json", "--record-nvml", str(recording), timeout=60)
    assert live.returncode == 0, live.stderr
    document = json.loads(recording.read_text())
    assert {e["path"] for e in document["sysfs"]} >= {
        "/proc/cmdline",
        "/sys/class/iommu",
        "/sys/kernel/iommu_groups",
    }
    again = run_provision(
        "probe", "--json", timeout=60, env={**os.environ, nvml.REPLAY_VARIABLE: str(recording)}
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["pci"] == json.loads(live.stdout)["pci"]


def test_a_damaged_sysfs_recording_is_one_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recording = tmp_path / "bad.nvml.json"
    recording.write_text(
        json.dumps(
            {
                "format": "provision-nvml-recording",
                "version": 1,
                "calls": [],
                "sysfs": [{"op": "read", "path": "/proc/cmdline"}],
            }
        )
    )
    monkeypatch.setenv(nvml.REPLAY_VARIABLE, str(recording))
    with pytest.raises(InputError, match=r"bad\.nvml\.json: not a readable NVML recording \(sysfs\[0\]"):
        probe.probe()


def test_the_hand_written_8_gpu_machine_replays_into_its_probe_document() -> None:
    recording = json.loads((DATA / "rtx-pro-6000-x8.nvml.json").read_text())
    assert recording["sysfs"] == pcispace.rtx_pro_6000_x8_sysfs() and "hand-written" in recording["note"]
    replay = sysfs.Replay(recording["sysfs"])
    bus_ids = [(i, f"00000000:{0x18 + 0x10 * i:02x}:00.0") for i in range(8)]
    found, _ = pci.read(replay, bus_ids)
    doc = documents.load_machine(RTX_DOC)
    assert (
        doc.pci == found
        and found.iommu.mode == "passthrough"
        and found.iommu.cmdline == ("intel_iommu=on", "iommu=pt")
    )
    assert all(len(g.bridges) == 3 and g.iommu_domain == "identity" for g in found.gpus)
    for bridge in doc.pci.bridges:  # the decoded bits are the control register's
        if bridge.acs is not None:
            assert all(
                getattr(bridge.acs, name) == on
                for name, on in pciconfig.acs_flags(bridge.acs.control).items()
            )
    paths = {g.gpu: g for g in found.gpus}
    assert all(
        link.bridges == pci.pair_path(paths[link.gpu_a], paths[link.gpu_b]) and len(link.bridges) == 6
        for link in doc.topology
    )
    p2p = gate(doc, "p2p")
    assert p2p.status == "warn" and "ACS on 16 PCI bridge(s)" in p2p.reason and NCCL_ACS in p2p.source
    assert gate(doc, "custom-allreduce").status == "warn"  # passthrough: through the root complex, not lost


def test_a_probe_document_with_a_wrong_pci_key_is_one_error(tmp_path: Path) -> None:
    doc = json.loads(RTX_DOC.read_text())
    doc["pci"]["bridges"][0]["acs"]["control"] = "0x1d"
    bad = tmp_path / "bad.probe.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"pci\.bridges\[0\]\.acs\.control: expected an integer"):
        documents.load_machine(bad)
    old = json.loads(RTX_DOC.read_text())
    del old["pci"]
    for link in old["topology"]:
        del link["bridges"]
    (tmp_path / "old.probe.json").write_text(json.dumps(old))
    facts = documents.load_machine(tmp_path / "old.probe.json")  # a document from before the PCI facts
    assert not facts.pci.read and gate(facts, "p2p").status == "pass"


def test_the_nccl_check_seeing_peer_access_does_not_hide_acs_redirect() -> None:
    facts = two_gpu_facts(switch_pair(acs_control=0x001D, domain="DMA"))
    nccl = CheckResult(
        id="nccl-allreduce",
        status="pass",
        details=NcclAllreduceDetails(peer_access=[[True, True], [True, True]]),
    )
    (seen,) = observed.apply([gate(facts, "p2p")], {"nccl-allreduce": nccl}, 2, facts)
    assert seen.status == "warn" and seen.reason.startswith(
        "the NCCL check saw peer access between all 2 GPUs"
    )
    assert "setpci" in seen.reason
    clean = two_gpu_facts(switch_pair(acs_control=0, domain=None))
    (ok,) = observed.apply([gate(clean, "p2p")], {"nccl-allreduce": nccl}, 2, clean)
    assert ok.status == "pass"


@pytest.mark.parametrize(
    ("cmdline", "mode"),
    [
        (b"ro iommu=pt\n", "passthrough"),
        (b"iommu.passthrough=0\n", "translated"),
        (b"iommu=pt iommu=nopt\n", "translated"),
        (b"quiet\n", "unknown"),
    ],
)
def test_a_group_without_a_type_file_takes_the_kernel_options(cmdline: bytes, mode: str) -> None:
    """Kernels before 5.6 have no /sys/kernel/iommu_groups/N/type: the group is there, its domain from the options."""
    files = sysfs.Replay(
        [
            pcispace.entry("read", "/proc/cmdline", cmdline),
            pcispace.entry(
                "resolve",
                "/sys/bus/pci/devices/0000:41:00.0",
                "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0",
            ),
            pcispace.entry(
                "resolve", "/sys/bus/pci/devices/0000:41:00.0/iommu_group", "/sys/kernel/iommu_groups/12"
            ),
        ]
    )
    found, _ = pci.read(files, [(0, "00000000:41:00.0")])
    assert (
        found.gpus[0].iommu_group == 12 and found.gpus[0].iommu_domain is None and found.gpus[0].iommu == mode
    )


def test_the_real_h200_recording_replays_into_what_the_live_probe_printed(provision_bin: str) -> None:
    """docs/evidence/h200-2026-12-01-p2p: `probe --json --record-nvml` on the H200 machine; its replay here must give
    the very `pci` section and notes that the live run printed there (a VM, the GPU on the root bus, IOMMU off)."""
    live = json.loads((ROOT / "docs/evidence/h200-2026-12-01-p2p/01-probe-json.out").read_text())
    again = run_provision(
        "probe",
        "--json",
        timeout=60,
        env={**os.environ, nvml.REPLAY_VARIABLE: str(DATA / "h200-p2p.nvml.json")},
    )
    assert again.returncode == 0, again.stderr
    replayed = json.loads(again.stdout)
    assert replayed["pci"] == live["pci"]
    assert live["pci"]["gpus"][0]["bdf"] == "0000:00:06.0" and live["pci"]["gpus"][0]["iommu"] == "off"
    assert live["pci"]["bridges"] == [] and any("virtual machine" in n for n in live["notes"])
