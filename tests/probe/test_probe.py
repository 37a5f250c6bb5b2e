from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, ROOT
from launch import run_provision

from provision.machine import nvml, toolkits
from provision.machine.facts import MachineFacts


def replay(name: str) -> nvml.Reading:
    return nvml.read(nvml.replay_file(DATA / name))


def test_topology_levels_are_nvidia_smi_names() -> None:
    assert set(nvml.TOPOLOGY_LEVELS.values()) == {"X", "PIX", "PXB", "PHB", "NODE", "SYS"}
    assert nvml.P2P_STATUS[nvml.P2P_STATUS_OK] == "ok"


def test_h200_recording_reads_like_nvidia_smi() -> None:
    r = replay("h200.nvml.json")
    assert r.driver.version == "580.159.04" and r.driver.cuda == "13.0" and r.driver.cuda_raw == 13000
    (gpu,) = r.gpus
    assert gpu.name == "NVIDIA H200" and gpu.compute_capability == "9.0" and gpu.sm == "sm_90"
    assert gpu.architecture == "Hopper"
    assert gpu.memory_total_bytes == 150754820096  # 143771 MiB in nvidia-smi
    assert (gpu.pcie.gen_current, gpu.pcie.width_max) == (5, 16)
    assert gpu.nvlink_supported is False and gpu.nvlink_active_links == 0
    assert gpu.mig_mode == "disabled" and gpu.persistence_mode is True
    assert r.topology == []


def test_rtx_pro_6000_x8_handwritten_machine() -> None:
    r = replay("rtx-pro-6000-x8.nvml.json")
    assert r.driver.cuda == "13.1" and len(r.gpus) == 8
    assert {g.sm for g in r.gpus} == {"sm_120"} and {g.architecture for g in r.gpus} == {"Blackwell"}
    assert len(r.topology) == 28  # every pair once
    assert {link.link for link in r.topology} == {"NODE", "SYS"}
    facts = MachineFacts(gpus=tuple(r.gpus), topology=tuple(r.topology))
    assert facts.pcie_only


def test_nvlink_pairs_are_named_nv_count_and_field_errors_become_notes() -> None:
    r = replay("h100-nvlink-x2.nvml.json")
    assert [link.link for link in r.topology] == ["NV4"]
    assert r.gpus[0].nvlink_active_links == 4 and r.gpus[1].mig_mode == "enabled"
    assert r.gpus[0].persistence_mode is None  # the recording holds an error for that field
    assert not MachineFacts(gpus=tuple(r.gpus), topology=tuple(r.topology)).pcie_only


def test_no_driver_is_a_note_not_an_exception() -> None:
    r = replay("no-driver.nvml.json")
    assert r.gpus == [] and r.driver.version is None
    assert "no NVIDIA driver" in r.notes[0]


def test_kernel_module_flavour(tmp_path: Path) -> None:
    banner = tmp_path / "version"
    banner.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n")
    assert nvml.kernel_module_flavour(str(banner)) == "open"
    banner.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Release Build\n")
    assert nvml.kernel_module_flavour(str(banner)) == "proprietary"
    assert nvml.kernel_module_flavour(str(tmp_path / "missing")) is None


def test_machine_facts_round_trip() -> None:
    r = replay("rtx-pro-6000-x8.nvml.json")
    facts = MachineFacts(driver=r.driver, gpus=tuple(r.gpus), topology=tuple(r.topology))
    again = MachineFacts.from_dict(json.loads(json.dumps(facts.to_dict())), source="x")
    assert again.to_dict() == facts.to_dict()


def fake_nvcc(folder: Path, release: str, codes: str) -> Path:
    """A real executable that answers like nvcc: the toolkit finder runs it as a process."""
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) echo "Cuda compilation tools, release {release}, V{release}.41";;\n'
        f'--list-gpu-code) echo "{codes}";; --list-gpu-arch) echo "{codes.replace("sm_", "compute_")}";; esac\n'
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


def test_toolkits_found_in_cuda_home_and_in_a_venvs_nvcc_wheel(tmp_path: Path) -> None:
    fake_nvcc(tmp_path / "cuda-12.8", "12.8", "sm_90 sm_100 sm_120")
    venv = tmp_path / "venv"
    fake_nvcc(venv / "lib/python3.12/site-packages/nvidia/cu13", "13.0", "sm_75 sm_120 sm_121")
    found = toolkits.candidates((venv,), env={"CUDA_HOME": str(tmp_path / "cuda-12.8"), "PATH": ""})
    described = [toolkits.describe(path, how) for path, how in found.items()]
    by_version = {t.version: t for t in described if not isinstance(t, str)}
    assert by_version["12.8"].found_by[0] == "CUDA_HOME" and "sm_120" in by_version["12.8"].sms
    assert by_version["13.0"].found_by[0].startswith("venv") and by_version["13.0"].sms[-1] == "sm_121"


def test_broken_nvcc_is_a_note(tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path / "cuda", "x", "")
    nvcc.write_text("#!/bin/sh\nexit 3\n")
    assert isinstance(toolkits.describe(nvcc, ["test"]), str)


def test_a_toolkits_three_nvcc_questions_are_asked_at_once(tmp_path: Path) -> None:
    """Each call of this nvcc waits until all three have started (a barrier of files): asked in turn, the first would
    wait for ones not started yet, give up after 20 s and fail, and the toolkit would be a note."""
    nvcc = fake_nvcc(tmp_path / "cuda", "13.0", "sm_90 sm_120")
    real = nvcc.with_name("answer")
    nvcc.rename(real)
    marks = tmp_path / "started"
    marks.mkdir()
    nvcc.write_text(
        f'#!/bin/sh\ntouch "{marks}/$1"\nfor _ in $(seq 200); do\n'
        f'  [ "$(ls "{marks}" | wc -l)" -ge 3 ] && exec "{real}" "$1"\n  sleep 0.1\ndone\nexit 1\n'
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    toolkit = toolkits.describe(nvcc, ["test"])
    assert not isinstance(toolkit, str), toolkit
    assert (
        toolkit.version == "13.0"
        and toolkit.sms == ("sm_90", "sm_120")
        and toolkit.ptx == ("compute_90", "compute_120")
    )


def test_the_nvcc_processes_start_before_the_readers_are_imported() -> None:
    """probe's module imports only what starts its threads (NVML's, then the nvcc processes'); the toolkit finder,
    the facts' classes, NVML, PCI and host readers (and pynvml) come while NVML starts."""
    code = "import sys\nfrom provision.machine import probe\nprint(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        ).stdout.split()
    )
    assert "provision.machine.threads" in loaded
    assert (
        not {
            "provision.machine.toolkits",
            "provision.proc",
            "provision.machine.facts",
            "provision.machine.nvml",
            "provision.machine.pci",
            "provision.machine.host",
            "provision.knowledge",
            "pynvml",
            "ctypes",
        }
        & loaded
    ), loaded


def test_probe_process_on_this_machine(provision_bin: str) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = run_provision("probe", "--json", timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == 1
    for key in ("driver", "gpus", "topology", "toolkits", "host", "notes"):
        assert key in doc
    assert doc["host"]["python"] and doc["host"]["arch"]
    # CPU time, which a loaded machine does not stretch (a hang ends at the 60 s timeout above)
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime < 5


def test_probe_process_replaying_the_8_gpu_machine(provision_bin: str) -> None:
    env = {**os.environ, nvml.REPLAY_VARIABLE: str(DATA / "rtx-pro-6000-x8.nvml.json")}
    done = run_provision("probe", "--json", env=env, timeout=60)
    doc = json.loads(done.stdout)
    assert [g["sm"] for g in doc["gpus"]] == ["sm_120"] * 8
    assert doc["driver"]["cuda"] == "13.1"
    table = run_provision("probe", env=env, timeout=60)
    assert table.returncode == 0 and "RTX PRO 6000" in table.stdout and "Topology" in table.stdout
    assert "PCI paths (IOMMU: passthrough)" in table.stdout and "ACS redirect 0x001d" in table.stdout
    assert len(doc["pci"]["bridges"]) == 24 and all(len(link["bridges"]) == 6 for link in doc["topology"])


def test_provision_calls_only_names_that_nvidia_ml_py_has() -> None:
    """The replay answering a name the binding lacks once hid every NVLink: the source is held to the real module."""
    import re

    import pynvml

    names = set()
    for source in (ROOT / "provision").rglob("*.py"):
        names |= set(re.findall(r"\.(nvml[A-Z]\w*)\(", source.read_text()))
    assert "nvmlDeviceGetNvLinkRemotePciInfo" in names
    missing = sorted(n for n in names if not hasattr(pynvml, n))
    assert missing == [], f"nvidia-ml-py has no {missing}"


def test_replay_answers_only_what_the_binding_would() -> None:
    import pynvml
    import pytest

    lib = nvml.replay_file(DATA / "h100-nvlink-x2.nvml.json")
    with pytest.raises(AttributeError):
        lib.nvmlDeviceGetNvLinkRemotePciInfo_v2  # noqa: B018 - the C name, not the module's
    handle = lib.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(TypeError):
        lib.nvmlDeviceGetNvLinkState(handle)  # the real function takes (device, link)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        lib.nvmlDeviceGetPowerUsage(handle)  # exists in the binding, not in the recording
    assert lib.NVML_P2P_CAPS_INDEX_NVLINK == pynvml.NVML_P2P_CAPS_INDEX_NVLINK


def test_a_recording_replays_to_the_same_reading(tmp_path: Path) -> None:
    from provision.machine.recording import Recorder

    recorder = Recorder(nvml.replay_file(DATA / "h100-nvlink-x2.nvml.json"))
    first = nvml.read(recorder)
    recorder.write(tmp_path / "again.json")
    second = nvml.read(nvml.replay_file(tmp_path / "again.json"))
    assert (second.driver, second.gpus, second.topology) == (first.driver, first.gpus, first.topology)


def test_nvswitch_links_name_the_pair_like_nvidia_smi() -> None:
    switch = [nvml.NvLinkEnd(remote_bus_id="ffffffff:ff:ff.0", remote_type=nvml.DEVICE_TYPE_SWITCH)] * 18
    assert nvml.nvlink_name(switch, switch, "00000000:00:07.0", p2p_nvlink_ok=True) == "NV18"
    assert nvml.nvlink_name(switch, switch, "00000000:00:07.0", p2p_nvlink_ok=False) is None
    direct = [nvml.NvLinkEnd(remote_bus_id="00000000:2a:00.0", remote_type=0)] * 4
    assert nvml.nvlink_name(direct, direct, "00000000:2a:00.0", p2p_nvlink_ok=True) == "NV4"


def test_a_damaged_recording_is_one_line(tmp_path: Path, provision_bin: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"driver": "580"}')
    done = run_provision("probe", "--json", timeout=60, env={**os.environ, nvml.REPLAY_VARIABLE: str(bad)})
    assert (
        done.returncode == 2
        and "not a readable NVML recording" in done.stderr
        and "Traceback" not in done.stderr
    )


def test_the_recorded_2_x_h200_nvswitch_pair_reads_nv18_like_nvidia_smi() -> None:
    """Recorded with `provision probe --record-nvml` on the lent 2 x H200 machine (docs/evidence/h200-x2-2026-11-30-a),
    where `nvidia-smi topo -m` printed NV18: every link's far end is the NVSwitch, never the peer GPU."""
    r = replay("h200-x2.nvml.json")
    assert [g.nvlink_active_links for g in r.gpus] == [18, 18]
    assert [(link.gpu_a, link.gpu_b, link.link, link.p2p_read) for link in r.topology] == [
        (0, 1, "NV18", "ok")
    ]
    assert not MachineFacts(gpus=tuple(r.gpus), topology=tuple(r.topology)).pcie_only


def _recording(*calls: dict[str, object]) -> str:
    return json.dumps({"format": "provision-nvml-recording", "version": 1, "calls": list(calls)})


def test_hostile_recordings_are_one_line_exit_2_never_a_hang_or_a_silent_no_driver(
    tmp_path: Path, provision_bin: str
) -> None:
    """A recording with an entry lacking its answer, an error code that is not a number, a handle that is not an
    index, or JSON nested past Python's recursion limit is not a recording: exit 2, not 'no NVIDIA driver'."""
    init = {"fn": "nvmlInit", "args": []}
    damaged = {
        "no-result": _recording(init),
        "error-text": _recording({**init, "error": "x"}),
        "bad-handle": _recording(
            {**init, "result": None},
            {"fn": "nvmlDeviceGetHandleByIndex", "args": [0], "result": {"handle": "x"}},
        ),
        "calls-dict": json.dumps({"format": "provision-nvml-recording", "calls": {"a": 1}}),
        "deep": "[" * 100_000,
    }
    for name, text in damaged.items():
        bad = tmp_path / f"{name}.json"
        bad.write_text(text)
        done = run_provision("probe", timeout=60, env={**os.environ, nvml.REPLAY_VARIABLE: str(bad)})
        assert done.returncode == 2, (name, done.stderr)
        assert "not a readable NVML recording" in done.stderr and "Traceback" not in done.stderr, name


def test_a_billion_gpus_is_a_note_not_a_hang(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    huge.write_text(
        _recording(
            {"fn": "nvmlInit", "args": [], "result": None},
            {"fn": "nvmlDeviceGetCount", "args": [], "result": 10**9},
        )
    )
    started = time.process_time()  # CPU time: a billion GPUs walked would take minutes of it, however loaded
    reading = nvml.read(nvml.replay_file(huge))
    assert time.process_time() - started < 5
    assert reading.gpus == [] and any("1000000000 is not a number of GPUs" in n for n in reading.notes)


def test_nvml_starts_on_a_thread_before_the_reading_and_every_start_is_shut_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """probe starts NVML (nvmlInitWithFlags of NVML's library: the driver's time) on a thread, and pynvml is imported while
    it runs, not after; nvml.read's own nvmlInit then only counts one more user, and both starts end in a shutdown
    (NVML counts its users)."""
    import threading

    from provision import knowledge
    from provision.machine import probe

    replay = nvml.replay_file(DATA / "h200.nvml.json")
    events: list[str] = []
    imported = threading.Event()

    class Library:  # NVML's library as ctypes opens it: its start waits until pynvml is imported elsewhere
        def nvmlInitWithFlags(self, flags: int) -> int:
            assert threading.current_thread() is not threading.main_thread()
            events.append(f"init thread, pynvml imported meanwhile: {imported.wait(30)}")
            return 0

        def nvmlShutdown(self) -> int:
            events.append("shutdown thread's")
            return 0

    class Counting:  # the binding, as the module `import pynvml` finds: the recorded H200 with its starts counted
        def __init__(self) -> None:
            imported.set()

        # on the reading's own thread, bounded (a driver that stops answering is a note)
        def nvmlInit(
            self,
        ) -> None:
            assert threading.current_thread() is not threading.main_thread()
            events.append(f"init reading, knowledge.toml read {knowledge.tables.cache_info().currsize}")

        def nvmlShutdown(self) -> None:
            events.append("shutdown")

        def __getattr__(self, name: str) -> object:
            return getattr(replay, name)

    # `import pynvml` gives Counting, seen as it happens
    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(
            self, name: str, path: object, target: object = None
        ) -> importlib.machinery.ModuleSpec | None:
            return importlib.util.spec_from_loader(name, self) if name == "pynvml" else None

        def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
            return Counting()

        def exec_module(self, module: object) -> None:
            pass

    import pynvml  # the real one, put back after the test

    # the fake Library answers only what the real binding asks the library
    source = Path(pynvml.__file__).read_text()
    assert f'CDLL("{probe.NVML_LIBRARY}")' in source
    assert all(
        f'_nvmlGetFunctionPointer("{name}")' in source for name in vars(Library) if name.startswith("nvml")
    )

    monkeypatch.delenv(nvml.REPLAY_VARIABLE, raising=False)
    monkeypatch.setattr(probe, "_open_library", Library)
    monkeypatch.delitem(sys.modules, "pynvml")
    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    knowledge.tables.cache_clear()
    facts = probe.probe()
    assert events == [
        "init thread, pynvml imported meanwhile: True",
        "init reading, knowledge.toml read 1",
        "shutdown",
        "shutdown thread's",
    ]
    assert [g.name for g in facts.gpus] == ["NVIDIA H200"] and facts.driver.version == "580.159.04"
    assert probe.REPLAY_VARIABLE == nvml.REPLAY_VARIABLE


def test_a_replay_starts_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from provision.machine import probe

    class Refusing:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"a replay touched pynvml.{name}")

    # its own binding checks against the real pynvml, made first
    replay = nvml.replay_file(DATA / "h200.nvml.json")
    monkeypatch.setenv(nvml.REPLAY_VARIABLE, str(DATA / "h200.nvml.json"))
    monkeypatch.setattr(nvml, "replay_file", lambda path: replay)
    monkeypatch.setitem(sys.modules, "pynvml", Refusing())
    assert [g.name for g in probe.probe().gpus] == ["NVIDIA H200"]


def test_provision_probe_imports_its_view_while_the_probe_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`provision probe` starts NVML's and the nvcc threads first, then imports the view that shows their facts."""
    import provision.views
    from provision.cli.main import cli
    from provision.cli.options import App
    from provision.machine import probe

    seen: list[str] = []

    class Watched(probe.Probing):
        def __init__(self, venvs: tuple[Path, ...] = (), record_nvml: Path | None = None) -> None:
            seen.append(f"started, view imported: {'provision.views.machine' in sys.modules}")
            super().__init__(venvs, record_nvml)

        def facts(self) -> MachineFacts:
            seen.append(f"facts, view imported: {'provision.views.machine' in sys.modules}")
            return super().facts()

    monkeypatch.setattr(probe, "Probing", Watched)
    monkeypatch.delitem(sys.modules, "provision.views.machine", raising=False)
    monkeypatch.delattr(provision.views, "machine", raising=False)
    monkeypatch.setenv(nvml.REPLAY_VARIABLE, str(DATA / "h200.nvml.json"))
    shown = cli.main(args=["probe", "--json"], prog_name="provision", standalone_mode=False, obj=App())
    assert seen == ["started, view imported: False", "facts, view imported: True"]
    assert shown.document["gpus"][0]["name"] == "NVIDIA H200"


HUNG_NVML = "#include <unistd.h>\nint nvmlInitWithFlags(unsigned flags) { sleep(600); return 0; }\nint nvmlInit_v2(void) { sleep(600); return 0; }\n"


def hung_nvml(tmp_path: Path) -> dict[str, str | None]:
    """The environment of a machine whose driver never answers NVML's start: a real libnvidia-ml.so.1 that sleeps,
    found first on LD_LIBRARY_PATH, and a 1 s bound."""
    source = tmp_path / "nvml.c"
    source.write_text(HUNG_NVML)
    library = tmp_path / "lib" / "libnvidia-ml.so.1"
    library.parent.mkdir()
    subprocess.run(
        [shutil.which("cc") or "gcc", "-shared", "-fPIC", "-o", library, source], check=True, timeout=120
    )
    return {
        "LD_LIBRARY_PATH": str(library.parent),
        nvml.REPLAY_VARIABLE: None,
        "PROVISION_NVML_START_TIMEOUT": "1",
    }


NO_CC = not (shutil.which("cc") or shutil.which("gcc"))


@pytest.mark.skipif(NO_CC, reason="no C compiler to build a hung NVML library")
def test_a_driver_that_never_answers_nvml_is_a_note_not_a_hang(tmp_path: Path) -> None:
    """A libnvidia-ml.so.1 whose start never returns (a hung driver; here a real library that sleeps): probe waits
    PROVISION_NVML_START_TIMEOUT seconds, then reads the rest and says why no GPU was read. It waited forever; an
    unreadable wait is a usage error."""
    env = hung_nvml(tmp_path)
    record = tmp_path / "record.json"
    done = run_provision("probe", "--json", "--record-nvml", record, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["gpus"] == [] and any(
        n.startswith("NVML did not start within 1 s") and "nothing recorded" in n for n in facts["notes"]
    ), facts["notes"]
    assert not record.exists()
    bad = run_provision("probe", env={**env, "PROVISION_NVML_START_TIMEOUT": "nan"}, timeout=60)
    assert (
        bad.returncode == 2 and "PROVISION_NVML_START_TIMEOUT='nan' is not a number of seconds" in bad.stderr
    )


@pytest.mark.skipif(NO_CC, reason="no C compiler to build a hung NVML library")
def test_check_and_baseline_do_not_hang_on_a_driver_that_never_answers(tmp_path: Path) -> None:
    """check and baseline read NVML in their own process too: behind the probe's bound, a hung driver is a note and a
    result within seconds. Both waited forever (the library sleeps 600 s; the test's own limit is 120 s)."""
    env = hung_nvml(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    home = tmp_path / "home"
    run_provision("adopt", "hung", venv, "--no-lock", "--home", home, check=True)
    started = time.monotonic()
    # before a check: its own read
    baseline = run_provision("baseline", "hung", "--home", home, env=env, timeout=120)
    assert (
        baseline.returncode != 0
        and "did not answer NVML's start in time (no answer within 1 s)" in baseline.stderr
    ), baseline.stderr
    done = run_provision("check", "hung", "--json", "--home", home, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    # a driver that does not answer is no machine without GPUs: the GPU checks are ERROR, never SKIP (issue 36)
    assert (
        checks["driver"]["status"] == "error"
        and "did not answer NVML's start in time (no answer within 1 s)" in checks["driver"]["reason"]
    ), checks
    assert time.monotonic() - started < 60


def test_record_nvml_naming_a_folder_overwrites_nothing(tmp_path: Path) -> None:
    """`--record-nvml true/` where `true` is a file: pathlib dropped the slash and the recording replaced the file.
    A file name ends with no /: exit 2 naming the option, and the file is as it was."""
    kept = tmp_path / "true"
    kept.write_text("mine\n")
    done = run_provision(
        "probe", "--record-nvml", f"{kept}/", env={nvml.REPLAY_VARIABLE: str(DATA / "h200.nvml.json")}
    )
    assert done.returncode == 2 and f"--record-nvml {kept}/" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2 and kept.read_text() == "mine\n"
