"""`provision probe`: one fast, complete reading of the machine. Never raises for missing hardware."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from provision.machine import host, nvml, toolkits
from provision.machine.facts import MachineFacts


def probe(venvs: tuple[Path, ...] = ()) -> MachineFacts:
    """Return the machine's facts; NVML and the nvcc processes run side by side."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        toolkit_job = pool.submit(toolkits.find, venvs)
        try:
            reading = nvml.read(nvml.load_library())
        except Exception as exc:  # a broken binding must not cost the rest of the reading
            reading = nvml.Reading()
            reading.notes.append(f"NVML reader failed: {type(exc).__name__}: {exc}")
        found, toolkit_notes = toolkit_job.result()
    return MachineFacts(
        driver=reading.driver,
        gpus=tuple(reading.gpus),
        topology=tuple(reading.topology),
        toolkits=tuple(found),
        host=host.read(),
        notes=tuple(reading.notes + toolkit_notes),
    )
