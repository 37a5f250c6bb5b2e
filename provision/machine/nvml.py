"""Read driver, GPUs and topology through NVML (nvidia-ml-py). Never raises for missing hardware.

`read(lib)` takes the `pynvml` module or anything with the same functions, which is how recorded readings of
real machines (tests/data/*.nvml.json, replayed by `Replay`) run through exactly this code.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from provision import compat
from provision.machine.facts import Driver, Gpu, Link, Pcie

T = TypeVar("T")
REPLAY_VARIABLE = "PROVISION_NVML_REPLAY"


class Reading:
    def __init__(self) -> None:
        self.driver = Driver()
        self.gpus: list[Gpu] = []
        self.topology: list[Link] = []
        self.notes: list[str] = []


def load_library() -> Any:
    """Return the NVML binding: a replay when PROVISION_NVML_REPLAY names a recording, else pynvml."""
    recording = os.environ.get(REPLAY_VARIABLE)
    if recording:
        return Replay(json.loads(Path(recording).read_text()))
    import pynvml

    return pynvml


def read(lib: Any) -> Reading:
    """Return what NVML says about this machine; every failure becomes a note."""
    reading = Reading()
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded...
        reading.notes.append(f"NVML not available ({_name(exc)}): no NVIDIA driver on this machine, no GPUs read")
        return reading
    try:
        _read_driver(lib, reading)
        handles = _read_gpus(lib, reading)
        _read_topology(lib, reading, handles)
    finally:
        _try(lambda: lib.nvmlShutdown(), reading, None)
    return reading


def _read_driver(lib: Any, reading: Reading) -> None:
    version = _try(lambda: _str(lib.nvmlSystemGetDriverVersion()), reading, "driver version")
    raw = _try(lambda: int(lib.nvmlSystemGetCudaDriverVersion_v2()), reading, "CUDA driver version")
    nvml_version = _try(lambda: _str(lib.nvmlSystemGetNVMLVersion()), reading, "NVML version")
    reading.driver = Driver(
        version=version,
        cuda=compat.cuda_from_nvml(raw) if raw else None,
        cuda_raw=raw,
        kernel_module=kernel_module_flavour(),
        nvml_version=nvml_version,
    )


def _read_gpus(lib: Any, reading: Reading) -> list[Any]:
    count = _try(lambda: int(lib.nvmlDeviceGetCount()), reading, "GPU count") or 0
    handles = []
    for index in range(count):
        handle = _try(functools.partial(lib.nvmlDeviceGetHandleByIndex, index), reading, f"GPU {index} handle")
        if handle is None:
            continue
        handles.append(handle)
        reading.gpus.append(_read_gpu(lib, reading, index, handle))
    return handles


def _read_gpu(lib: Any, reading: Reading, index: int, handle: Any) -> Gpu:
    def get(what: str, fn: Callable[[], T]) -> T | None:
        return _try(fn, reading, f"GPU {index} {what}")

    cc_pair = get("compute capability", lambda: lib.nvmlDeviceGetCudaComputeCapability(handle))
    cc = f"{cc_pair[0]}.{cc_pair[1]}" if cc_pair else None
    memory = get("memory", lambda: lib.nvmlDeviceGetMemoryInfo(handle))
    mig = _quiet(lambda: lib.nvmlDeviceGetMigMode(handle))
    nvlink_supported, active = _nvlinks(lib, handle)
    return Gpu(
        index=index,
        name=get("name", lambda: _str(lib.nvmlDeviceGetName(handle))) or "unknown",
        uuid=get("UUID", lambda: _str(lib.nvmlDeviceGetUUID(handle))),
        pci_bus_id=get("PCI bus id", lambda: _str(lib.nvmlDeviceGetPciInfo(handle).busId)),
        compute_capability=cc,
        sm=compat.sm_name(cc) if cc else None,
        architecture=compat.arch_name(cc) if cc else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        pcie=Pcie(
            gen_current=_quiet(lambda: int(lib.nvmlDeviceGetCurrPcieLinkGeneration(handle))),
            gen_max=_quiet(lambda: int(lib.nvmlDeviceGetMaxPcieLinkGeneration(handle))),
            width_current=_quiet(lambda: int(lib.nvmlDeviceGetCurrPcieLinkWidth(handle))),
            width_max=_quiet(lambda: int(lib.nvmlDeviceGetMaxPcieLinkWidth(handle))),
        ),
        nvlink_active_links=active,
        nvlink_supported=nvlink_supported,
        mig_mode=None if mig is None else ("enabled" if mig[0] else "disabled"),
        persistence_mode=_quiet(lambda: bool(lib.nvmlDeviceGetPersistenceMode(handle))),
    )


MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS


def _nvlinks(lib: Any, handle: Any) -> tuple[bool, int]:
    """Return (supported, active links); a GPU without NVLink answers NotSupported for link 0."""
    active = 0
    for link in range(MAX_NVLINKS):
        try:
            state = lib.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            return (link > 0, active)
        active += 1 if state else 0
    return True, active


def _nvlink_peers(lib: Any, handle: Any) -> list[str]:
    """Return the PCI bus ids at the far end of each active NVLink of a GPU."""
    peers = []
    for link in range(MAX_NVLINKS):
        try:
            if not lib.nvmlDeviceGetNvLinkState(handle, link):
                continue
            peers.append(_str(lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(handle, link).busId).lower())
        except Exception:
            break
    return peers


def _read_topology(lib: Any, reading: Reading, handles: list[Any]) -> None:
    bus_ids = [(gpu.pci_bus_id or "").lower() for gpu in reading.gpus]
    peers = [_nvlink_peers(lib, h) for h in handles]
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            nvlinks = peers[a].count(bus_ids[b]) if bus_ids[b] else 0
            if nvlinks:
                link = f"NV{nvlinks}"
            else:
                level = _try(
                    functools.partial(lib.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b]),
                    reading,
                    f"topology GPU {a}-{b}",
                )
                link = compat.TOPOLOGY_LEVELS.get(int(level), "unknown") if level is not None else "unknown"
            p2p = _try(
                functools.partial(lib.nvmlDeviceGetP2PStatus, handles[a], handles[b], P2P_CAPS_INDEX_READ),
                reading,
                f"P2P status GPU {a}-{b}",
            )
            status = compat.P2P_STATUS.get(int(p2p), "unknown") if p2p is not None else "unknown"
            reading.topology.append(Link(gpu_a=a, gpu_b=b, link=link, p2p_read=status))


P2P_CAPS_INDEX_READ = 0  # nvml.h NVML_P2P_CAPS_INDEX_READ


def kernel_module_flavour(path: str = "/proc/driver/nvidia/version") -> str | None:
    """Return "open" or "proprietary" from the loaded kernel module's banner, None when unreadable."""
    try:
        banner = Path(path).read_text(errors="replace")
    except OSError:
        return None
    if "Open Kernel Module" in banner:
        return "open"
    return "proprietary" if "Kernel Module" in banner else None


def _try(fn: Callable[[], T], reading: Reading, what: str | None) -> T | None:
    try:
        return fn()
    except Exception as exc:
        if what:
            reading.notes.append(f"{what}: not read ({_name(exc)})")
        return None


def _quiet(fn: Callable[[], T]) -> T | None:
    """Return fn() or None for fields that many GPUs simply do not support (MIG, PCIe on some SKUs)."""
    try:
        return fn()
    except Exception:
        return None


def _name(exc: Exception) -> str:
    return type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"


def _str(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlReplayError(Exception):
    """Raised by a replay where the recording holds an error, the way pynvml raises NVMLError."""


class Replay:
    """Answer pynvml's calls from a recording of a real machine (see tests/data/README.md)."""

    def __init__(self, recording: dict[str, Any]) -> None:
        self.data = recording
        self.gpus: list[dict[str, Any]] = recording.get("gpus", [])

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict) and "error" in value:
            raise NvmlReplayError(value["error"])
        return value

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if "init_error" in self.data:
            raise NvmlReplayError(self.data["init_error"])

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return str(self._value(self.data["driver"]))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:  # noqa: N802
        return int(self._value(self.data["cuda_driver_version"]))

    def nvmlSystemGetNVMLVersion(self) -> str:  # noqa: N802
        return str(self._value(self.data.get("nvml_version", {"error": "NotSupported"})))

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def _gpu(self, handle: int, key: str) -> Any:
        return self._value(self.gpus[handle].get(key, {"error": "NotSupported"}))

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return str(self._gpu(h, "name"))

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return str(self._gpu(h, "uuid"))

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:  # noqa: N802
        return _Struct(busId=self._gpu(h, "pci_bus_id"))

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:  # noqa: N802
        major, minor = self._gpu(h, "cc")
        return int(major), int(minor)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        return _Struct(total=self._gpu(h, "mem_total"))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return int(self._gpu(h, "pcie_gen_cur"))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:  # noqa: N802
        return int(self._gpu(h, "pcie_gen_max"))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return int(self._gpu(h, "pcie_width_cur"))

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:  # noqa: N802
        return int(self._gpu(h, "pcie_width_max"))

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:  # noqa: N802
        current, pending = self._gpu(h, "mig_mode")
        return int(current), int(pending)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:  # noqa: N802
        return int(self._gpu(h, "persistence"))

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        links = self._gpu(h, "nvlinks")  # list of remote PCI bus ids, one per active link
        if link >= len(links):
            raise NvmlReplayError("InvalidArgument")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, h: int, link: int) -> Any:  # noqa: N802
        return _Struct(busId=self._gpu(h, "nvlinks")[link])

    def _pair(self, a: int, b: int, key: str) -> Any:
        pairs = self.data.get("pairs", {})
        entry = pairs.get(f"{min(a, b)},{max(a, b)}", {})
        return self._value(entry.get(key, {"error": "NotSupported"}))

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:  # noqa: N802
        return int(self._pair(a, b, "ancestor"))

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:  # noqa: N802
        return int(self._pair(a, b, "p2p_read"))


class _Struct:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
