"""`provision probe`: one fast, complete reading of the machine. Never raises for missing hardware.

NVML's start (nvmlInit: the driver's time, the GIL released) and the nvcc processes are the slowest parts: their
threads start first (this module imports nothing more before them; NVML's calls nvmlInit through ctypes, before pynvml
is imported), and pynvml, the facts' classes and the NVML, host and PCI readers are imported while they wait (see
docs/performance.md)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from provision.errors import ProvisionError
from provision.machine.threads import Background

REPLAY_VARIABLE = (
    "PROVISION_NVML_REPLAY"  # nvml.REPLAY_VARIABLE, spelt here: importing nvml (and the facts) waits
)
START_VARIABLE = (
    "PROVISION_NVML_START_TIMEOUT"  # seconds NVML's start may take (a hung driver); default START_TIMEOUT
)
START_TIMEOUT = 60.0  # nvmlInit of eight GPUs without persistence mode takes seconds; a driver that never answers, forever

if TYPE_CHECKING:
    from pathlib import Path

    from provision.machine import nvml, sysfs
    from provision.machine.facts import GpuPath, Link, MachineFacts, Toolkit
    from provision.machine.recording import Recorder


def probe(venvs: tuple[str | os.PathLike[str], ...] = (), record_nvml: Path | None = None) -> MachineFacts:
    """Return the machine's facts; NVML and the nvcc processes run side by side. With `record_nvml`, every raw NVML
    answer and every sysfs file read is also written there, so that the reading replays exactly
    (PROVISION_NVML_REPLAY=FILE)."""
    return Probing(venvs, record_nvml).facts()


class Probing:
    """A probe under way: made, it has started its threads; `facts()` reads the rest and waits for them. The caller
    may import what it needs meanwhile (`provision probe` its view)."""

    def __init__(
        self, venvs: tuple[str | os.PathLike[str], ...] = (), record_nvml: Path | None = None
    ) -> None:
        # NVML first, on a thread (a replay starts nothing): its start is the slowest part; nvml.read's own nvmlInit
        # then only counts one more user. Where NVML crashed a reading before, it is started in a child first.
        self._nvml = _NvmlStart()
        from provision.machine import toolkits

        self._toolkits = Background(toolkits.find, venvs)  # the nvcc processes, on a thread too
        self._record_nvml = record_nvml

    def facts(self) -> MachineFacts:
        return _facts(self._nvml, self._toolkits, self._record_nvml)


class _NvmlStart:
    """NVML's start under way on its thread (`started`), None for a replay or where NVML crashed a child just now
    (`crashed`: why, and the reading says so without calling NVML) or no child could be started to read it in
    (`unasked`: why); `mark` is nvmlguard's mark of the reading."""

    def __init__(self) -> None:
        self.started: Background[Any] | None = None
        self.crashed: str | None = None
        self.unasked: str | None = None
        self.mark: str | None = None
        if os.environ.get(REPLAY_VARIABLE):
            return
        from provision.machine import nvmlguard

        limit = _start_timeout()  # a wait that is no number is exit 2 before a mark is removed
        if nvmlguard.suspected():  # a reading died inside NVML before: it is tried in a child first
            try:
                died = nvmlguard.child_start(_read_in_child, limit)
            except OSError as exc:  # no child (fork: EAGAIN, ENOMEM): a driver not asked is no "no driver"
                self.unasked = f"fork: {exc.strerror or exc}"
                return
            # a child that never answered says nothing of a crash: `crashed` stays as it is
            if died != "timeout":
                nvmlguard.crashed(died is not None)
            # NVML is not called here (a driver that does not answer is not waited for twice)
            if died is not None:
                self.crashed = died
                return
        self.mark = nvmlguard.begin()
        self.started = Background(_start_nvml, None)


def _facts(
    started: _NvmlStart,
    toolkit_job: Background[tuple[list[Toolkit], list[str]]],
    record_nvml: Path | None,
) -> MachineFacts:
    # the facts' classes, NVML's, the host's and the PCI readers are imported while the threads run
    from provision import knowledge
    from provision.machine import host, pci, sysfs
    from provision.machine.facts import MachineFacts

    host_facts = host.read()  # what needs no NVML is read while nvmlInit runs
    # pynvml's import (about 20 ms of Python) while the driver starts on the thread
    if started.started is not None:
        # nvml.read's load_library imports it again, and notes what failed
        with contextlib.suppress(Exception):
            import pynvml  # noqa: F401
    if started.started is not None and started.started.running():
        knowledge.tables()  # the GPUs' architecture names: knowledge.json read now, not after the wait
    reading, recorder = _nvml_reading(started, record_nvml)
    files = _files(record=recorder is not None)
    # a replay's host facts are this machine's: its virtualization says nothing of the recorded PCI tree
    virtualization = None if isinstance(files, sysfs.Replay) else host_facts.virtualization
    pci_facts, pci_notes = pci.read(files, [(g.index, g.pci_bus_id) for g in reading.gpus], virtualization)
    if recorder is not None and record_nvml is not None:
        _write_recording(recorder, record_nvml, files)
    found, toolkit_notes = toolkit_job.result()
    paths = {g.gpu: g for g in pci_facts.gpus}
    return MachineFacts(
        driver=reading.driver,
        gpus=tuple(reading.gpus),
        topology=tuple(_with_path(link, paths) for link in reading.topology),
        toolkits=tuple(found),
        host=host_facts,
        pci=pci_facts,
        notes=tuple(reading.notes + pci_notes + toolkit_notes),
    )


def gpu_reading() -> nvml.Reading:
    """NVML's reading alone, behind the probe's bounded start: what `check` and `baseline` read. A driver that never
    answers is a note after PROVISION_NVML_START_TIMEOUT seconds (no GPUs), never a hang."""
    return _nvml_reading(_NvmlStart(), None)[0]


def _nvml_reading(begun: _NvmlStart, record_nvml: Path | None) -> tuple[nvml.Reading, Recorder | None]:
    """nvml.read once NVML's start (on its thread) has ended, or a note where it did not end within the bound (or
    where NVML crashed a child just now: it is not called); with `record_nvml`, through a Recorder (returned, None
    otherwise or when nothing could be recorded)."""
    from provision.machine import nvml, nvmlguard

    if begun.crashed == "timeout":
        return _start_timed_out(_start_timeout(), record_nvml), None
    if begun.crashed is not None or begun.unasked is not None:
        from provision.machine import nvmlstart
        from provision.machine.facts import Driver

        reading = nvml.Reading()
        start = (
            nvmlstart.started("crashed", detail=begun.crashed)
            if begun.crashed is not None
            else nvmlstart.started("not_asked", detail=str(begun.unasked))
        )
        reading.driver = Driver(nvml=start)
        reading.notes.append(nvml.failed_note(start))
        return reading, None
    try:
        return _nvml_read(begun.started, record_nvml)
    finally:
        nvmlguard.end(begun.mark)


def _nvml_read(
    started: Background[Any] | None, record_nvml: Path | None
) -> tuple[nvml.Reading, Recorder | None]:
    from provision.machine import nvml

    limit = _start_timeout() if started is not None else 0.0
    if started is not None and not started.wait(limit):  # a hung driver: pynvml's own nvmlInit would wait too
        return _start_timed_out(limit, record_nvml), None
    recorder = None
    # nvmlInit done: nvml.read's own is only counted
    early = started.result() if started is not None else None
    try:
        lib = nvml.load_library()
        if record_nvml is not None:
            from provision.machine.recording import Recorder

            lib = recorder = Recorder(lib)
        reading, answered = _read_within(lib, limit) if started is not None else (nvml.read(lib), True)
        if not answered:
            early, recorder = None, None  # its shutdown could hang as well; nothing whole was recorded
    except ProvisionError:
        raise
    except Exception as exc:  # a broken binding must not cost the rest of the reading
        from provision.machine import nvmlstart
        from provision.machine.facts import Driver

        reading = nvml.Reading()
        reading.driver = Driver(nvml=nvmlstart.started("failed", detail=f"{type(exc).__name__}: {exc}"))
        reading.notes.append(f"NVML reader failed: {type(exc).__name__}: {exc}")
    finally:
        _stop_nvml(early)
    return reading, recorder


def _start_timed_out(limit: float, record_nvml: Path | None) -> nvml.Reading:
    """The reading of a driver that did not answer NVML's start within `limit` seconds."""
    from provision.machine import nvml, nvmlstart
    from provision.machine.facts import Driver

    reading = nvml.Reading()
    reading.driver = Driver(nvml=nvmlstart.started("timeout", detail=f"no answer within {limit:g} s"))
    reading.notes.append(
        f"NVML did not start within {limit:g} s (the driver does not answer): no GPUs read"
        + ("; nothing recorded" if record_nvml is not None else "")
        + f"; {START_VARIABLE} sets the wait"
    )
    return reading


def _read_in_child() -> None:
    """NVML read whole in nvmlguard's child: a library that starts cleanly and dies in a later call (its driver
    version, a GPU's handle) is caught there too, not only one that dies in nvmlInit."""
    from provision.machine import nvml

    nvml.read(nvml.load_library())


def _read_within(lib: Any, limit: float) -> tuple[nvml.Reading, bool]:
    """nvml.read(lib) on its thread, and whether it ended within `limit` seconds: a driver that started and then
    stopped answering (a later call that never returns) is a note, never a hang (the thread is left to the process's
    end)."""
    from provision.machine import nvml

    job = Background(nvml.read, lib)
    if job.wait(limit):
        return job.result(), True
    from provision.machine import nvmlstart
    from provision.machine.facts import Driver

    reading = nvml.Reading()
    reading.driver = Driver(
        nvml=nvmlstart.started("timeout", detail=f"it started, then stopped answering within {limit:g} s")
    )
    reading.notes.append(
        f"NVML stopped answering after its start (no reading within {limit:g} s): no GPUs read; "
        f"{START_VARIABLE} sets the wait"
    )
    return reading, False


def _start_timeout() -> float:
    from provision import durations

    return durations.seconds(START_VARIABLE, START_TIMEOUT, "60")


NVML_LIBRARY = "libnvidia-ml.so.1"  # the name pynvml's nvmlInit loads on Linux


def _open_library() -> Any:
    import ctypes

    return ctypes.CDLL(NVML_LIBRARY)


def _start_nvml(_: None) -> Any:
    """NVML's library started through ctypes (nvmlInitWithFlags(0), what pynvml.nvmlInit calls), or None where it
    cannot start (nvml.read then notes why, as without this). Done before pynvml is imported: pynvml's import is about
    20 ms of Python (the GIL held), the driver's start 27 ms of C (ctypes lets the GIL go), so the main thread imports
    pynvml while the driver starts, where pynvml's own nvmlInit would wait for its import. pynvml still makes every
    reading (nvml.read); its nvmlInit finds the library loaded (dlopen counts) and NVML started (nvmlInit counts its
    users, nvml.h)."""
    try:
        library = _open_library()
        if library.nvmlInitWithFlags(0) != 0:  # what pynvml.nvmlInit calls; NVML_SUCCESS is 0
            return None
    except (OSError, AttributeError):  # no driver, or a library without nvmlInitWithFlags
        return None
    return library


def _stop_nvml(lib: Any) -> None:
    """NVML counts its users: this shutdown ends _start_nvml's (nvmlShutdown of the same library), nvml.read ended its
    own."""
    if lib is not None:
        with contextlib.suppress(Exception):  # shutting down cannot cost the reading
            lib.nvmlShutdown()


def _with_path(link: Link, paths: dict[int, GpuPath]) -> Link:
    from provision.machine import pci

    if link.gpu_a in paths and link.gpu_b in paths:
        return link._replace(bridges=pci.pair_path(paths[link.gpu_a], paths[link.gpu_b]))
    return link


def _files(record: bool) -> sysfs.Files:
    """Where the PCI facts come from: the replayed recording's `sysfs` answers, or this machine (written down when
    recording)."""
    from provision.machine import nvml, sysfs

    replay = os.environ.get(nvml.REPLAY_VARIABLE)
    if replay:
        from pathlib import Path

        document = nvml.recording(Path(replay))
        try:
            return sysfs.Replay(document.get("sysfs") if isinstance(document, dict) else None)
        except sysfs.RecordingError as exc:
            raise nvml.unreadable(Path(replay), exc) from None
    return sysfs.Recorder(sysfs.Live()) if record else sysfs.Live()


def _write_recording(recorder: object, path: Path, files: sysfs.Files) -> None:
    from provision.errors import InputError
    from provision.machine import sysfs
    from provision.machine.recording import Recorder

    assert isinstance(recorder, Recorder)
    entries = files.entries if isinstance(files, sysfs.Recorder) else []
    try:
        import datetime

        today = datetime.date.today().isoformat()
        recorder.write(path, note=f"recorded by provision probe --record-nvml on {today}", sysfs=entries)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot write the NVML recording ({exc.strerror})", "name a writable file"
        ) from None
