"""`provision probe`: one fast, complete reading of the machine. Never raises for missing hardware."""

from __future__ import annotations

from pathlib import Path

from provision.errors import ProvisionError
from provision.machine import host, nvml, toolkits
from provision.machine.facts import MachineFacts
from provision.machine.threads import Background


def probe(venvs: tuple[Path, ...] = (), record_nvml: Path | None = None) -> MachineFacts:
    """Return the machine's facts; NVML and the nvcc processes run side by side. With `record_nvml`, every raw NVML
    answer read is also written there, so that the reading replays exactly (PROVISION_NVML_REPLAY=FILE)."""
    toolkit_job = Background(toolkits.find, venvs)
    recorder = None
    try:
        lib = nvml.load_library()
        if record_nvml is not None:
            from provision.machine.recording import Recorder

            lib = recorder = Recorder(lib)
        reading = nvml.read(lib)
    except ProvisionError:
        raise
    except Exception as exc:  # a broken binding must not cost the rest of the reading
        reading = nvml.Reading()
        reading.notes.append(f"NVML reader failed: {type(exc).__name__}: {exc}")
    if recorder is not None and record_nvml is not None:
        _write_recording(recorder, record_nvml)
    found, toolkit_notes = toolkit_job.result()
    return MachineFacts(
        driver=reading.driver,
        gpus=tuple(reading.gpus),
        topology=tuple(reading.topology),
        toolkits=tuple(found),
        host=host.read(),
        notes=tuple(reading.notes + toolkit_notes),
    )


def _write_recording(recorder: object, path: Path) -> None:
    from provision.errors import UsageError
    from provision.machine.recording import Recorder

    assert isinstance(recorder, Recorder)
    try:
        import datetime

        today = datetime.date.today().isoformat()
        recorder.write(path, note=f"recorded by provision probe --record-nvml on {today}")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the NVML recording ({exc.strerror})", "name a writable file") from None
