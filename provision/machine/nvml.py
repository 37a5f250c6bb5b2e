"""Read driver, GPUs and topology through NVML (nvidia-ml-py). Never raises for missing hardware.

`read(lib)` takes the `pynvml` module or anything with the same functions, which is how recorded readings of
real machines (tests/data/*.nvml.json, replayed by `Replay`) run through exactly this code.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from provision import knowledge
from provision.machine import nvmlstart
from provision.machine.facts import Driver, Fabric, Gpu, Link, NvmlStart, Pcie

if TYPE_CHECKING:
    from pathlib import Path

T = TypeVar("T")
REPLAY_VARIABLE = "PROVISION_NVML_REPLAY"  # probe.REPLAY_VARIABLE too (it starts NVML before importing this)
MAX_GPUS = 1024  # far above any one host; NVML itself numbers devices in an unsigned int
# NVML's topology common-ancestor levels, named as `nvidia-smi topo -m` prints them (nvml.h nvmlGpuTopologyLevel_t).
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# NVML's nvmlGpuP2PStatus_t, as cuda.bindings.nvml.GpuP2PStatus names it.
P2P_STATUS = {
    0: "ok",
    1: "chipset_not_supported",
    2: "gpu_not_supported",
    3: "ioh_topology_not_supported",
    4: "disabled_by_regkey",
    5: "not_supported",
    6: "unknown",
}
P2P_STATUS_OK = 0  # NVML_P2P_STATUS_OK


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
        from pathlib import Path

        return replay_file(Path(recording))
    import pynvml

    return pynvml


def replay_file(path: Path) -> Any:
    """A binding that answers from the recording in `path` (see provision/machine/recording.py)."""
    from provision.machine.recording import RecordingError, Replay

    try:
        return Replay(recording(path))
    except (KeyError, TypeError, RecordingError) as exc:
        raise unreadable(path, exc) from None


def recording(path: Path) -> Any:
    """The JSON document of a recording (NVML's calls and, since the PCI facts, the `sysfs` answers)."""
    from provision import regular

    try:
        data = regular.read_bytes(path, RECORDING_BYTES + 1)
        if len(data) > RECORDING_BYTES:  # read whole, an 8 GB file named by mistake took the machine's memory
            raise ValueError(f"larger than {RECORDING_BYTES >> 20} MiB")
        return json.loads(data.decode())
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise unreadable(path, exc) from None


RECORDING_BYTES = 64 << 20  # a recording of a 64-GPU machine, its sysfs answers included, is a few MB


def unreadable(path: Path, exc: Exception) -> Exception:
    from provision.errors import InputError

    return InputError(
        f"{path}: not a readable NVML recording ({exc})",
        "record one on the GPU machine with: provision probe --record-nvml FILE",
    )


def read(lib: Any) -> Reading:
    """Return what NVML says about this machine; every failure becomes a note."""
    reading = Reading()
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, NVMLError_LibRmVersionMismatch, DriverNotLoaded...
        code = getattr(exc, "value", None)
        # the kernel module is this machine's fact, not NVML's: a replay answers only what NVML answered
        loaded = not getattr(lib, "replaying", False) and os.path.exists(MODULE_VERSION)
        start = nvmlstart.of_error(code if type(code) is int else None, type(exc).__name__, loaded)
        reading.driver = Driver(nvml=start, kernel_module=kernel_module_flavour() if loaded else None)
        reading.notes.append(failed_note(start))
        return reading
    try:
        _read_driver(lib, reading)
        handles, ends = _read_gpus(lib, reading)
        _read_topology(lib, reading, handles, ends)
    finally:
        _try(lambda: lib.nvmlShutdown(), reading, None)
    return reading


def failed_note(start: NvmlStart) -> str:
    """The note of a start that failed: what NVML said, what it means, what to do."""
    said = f" ({start.error})" if start.error else ""
    return f"NVML did not start{said}: {start.reason}; no GPUs read; {start.hint}"


def _read_driver(lib: Any, reading: Reading) -> None:
    version = _try(lambda: _str(lib.nvmlSystemGetDriverVersion()), reading, "driver version")
    raw = _try(lambda: int(lib.nvmlSystemGetCudaDriverVersion_v2()), reading, "CUDA driver version")
    nvml_version = _try(lambda: _str(lib.nvmlSystemGetNVMLVersion()), reading, "NVML version")
    reading.driver = Driver(
        version=version,
        cuda=knowledge.cuda_from_nvml(raw) if raw else None,
        cuda_raw=raw,
        kernel_module=kernel_module_flavour(),
        nvml_version=nvml_version,
        nvml=nvmlstart.OK,
    )


def _read_gpus(lib: Any, reading: Reading) -> tuple[list[Any], list[list[NvLinkEnd]]]:
    count = _try(lambda: int(lib.nvmlDeviceGetCount()), reading, "GPU count") or 0
    # a damaged recording or binding: reading a billion handles would never end
    if not 0 <= count <= MAX_GPUS:
        reading.notes.append(f"GPU count: {count} is not a number of GPUs (0 to {MAX_GPUS}); no GPUs read")
        count = 0
    handles, ends = [], []
    for index in range(count):
        handle = _try(
            functools.partial(lib.nvmlDeviceGetHandleByIndex, index), reading, f"GPU {index} handle"
        )
        if handle is None:
            continue
        handles.append(handle)
        supported, gpu_ends = _nvlink_ends(lib, handle)
        ends.append(gpu_ends)
        reading.gpus.append(_read_gpu(lib, reading, index, handle, supported, len(gpu_ends)))
    return handles, ends


def _read_gpu(
    lib: Any, reading: Reading, index: int, handle: Any, nvlink_supported: bool, active: int
) -> Gpu:
    def get(what: str, fn: Callable[[], T]) -> T | None:
        return _try(fn, reading, f"GPU {index} {what}")

    cc = get(
        "compute capability", lambda: _compute_capability(lib.nvmlDeviceGetCudaComputeCapability(handle))
    )
    memory = get("memory", lambda: lib.nvmlDeviceGetMemoryInfo(handle))
    mig = _quiet(lambda: lib.nvmlDeviceGetMigMode(handle))
    return Gpu(
        index=index,
        name=get("name", lambda: _str(lib.nvmlDeviceGetName(handle))) or "unknown",
        uuid=get("UUID", lambda: _str(lib.nvmlDeviceGetUUID(handle))),
        pci_bus_id=get("PCI bus id", lambda: _str(lib.nvmlDeviceGetPciInfo(handle).busId)),
        compute_capability=cc,
        sm=knowledge.sm_name(cc) if cc else None,
        architecture=knowledge.arch_name(cc) if cc else None,
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
        fabric=fabric(lib, handle),
    )


# nvml.h NVML_GPU_FABRIC_STATE_*: 0 NOT_SUPPORTED is no fabric at all (PCIe GPUs, H100 PCIe)
FABRIC_STATES = {1: "not_started", 2: "in_progress", 3: "completed"}
NVML_ERROR_NOT_SUPPORTED = 3
# the versioned call first (driver R550+), then the first one; each with the structure nvidia-ml-py gives it
FABRIC_CALLS = (
    ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
    ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
)


def fabric(lib: Any, handle: Any) -> Fabric | None:
    """The GPU's NVSwitch fabric registration; None where NVML has none (NotSupported) or the binding lacks the call."""
    import ctypes

    for call, struct in FABRIC_CALLS:
        try:
            info = getattr(lib, struct)()
            getattr(lib, call)(handle, ctypes.byref(info))
        # NotSupported: no fabric here; FunctionNotFound (an older driver): the next call
        except Exception as exc:
            if getattr(exc, "value", None) == NVML_ERROR_NOT_SUPPORTED:
                return None
            continue
        state = int(info.state)
        if state == 0:
            return None
        uuid = bytes(int(b) & 0xFF for b in info.clusterUuid)
        return Fabric(
            state=FABRIC_STATES.get(state, "unknown"),
            status=int(info.status),
            clique_id=int(info.cliqueId),
            cluster_uuid=uuid.hex() if any(uuid) else None,
            health_mask=int(info.healthMask) if hasattr(info, "healthMask") else None,
        )
    return None


class NvLinkEnd(NamedTuple):
    """The far end of one active NVLink: a GPU (by PCI bus id) or an NVSwitch."""

    remote_bus_id: str | None
    remote_type: int | None  # NVML_NVLINK_DEVICE_TYPE_*: 0 GPU, 1 IBM NPU, 2 switch, 255 unknown


DEVICE_TYPE_GPU, DEVICE_TYPE_SWITCH = 0, 2  # nvml.h nvmlIntNvLinkDeviceType_t


def _nvlink_ends(lib: Any, handle: Any) -> tuple[bool, list[NvLinkEnd]]:
    """Return (NVLink supported, the far end of every active link). A GPU without NVLink answers NotSupported
    for link 0; past the GPU's last link NVML answers InvalidArgument."""
    ends: list[NvLinkEnd] = []
    for link in range(int(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            active = lib.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            return link > 0, ends
        if not active:
            continue
        remote_type = _quiet(functools.partial(_int, lib.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link))
        remote = _quiet(functools.partial(_remote_bus_id, lib, handle, link))
        ends.append(NvLinkEnd(remote_bus_id=remote, remote_type=remote_type))
    return True, ends


def _int(fn: Callable[..., Any], *args: Any) -> int:
    return int(fn(*args))


def _remote_bus_id(lib: Any, handle: Any, link: int) -> str:
    return _str(lib.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId).lower()


def nvlink_name(
    a_ends: list[NvLinkEnd], b_ends: list[NvLinkEnd], b_bus_id: str, p2p_nvlink_ok: bool
) -> str | None:
    """NV# as `nvidia-smi topo -m` names a pair: links straight to the peer GPU, or, through NVSwitch, the links each
    GPU has into the switch fabric when NVML says the pair's P2P goes over NVLink. None when NVLink does not join them."""
    direct = sum(
        1 for end in a_ends if end.remote_bus_id == b_bus_id and end.remote_type != DEVICE_TYPE_SWITCH
    )
    if direct:
        return f"NV{direct}"
    a_switch = sum(1 for end in a_ends if end.remote_type == DEVICE_TYPE_SWITCH)
    b_switch = sum(1 for end in b_ends if end.remote_type == DEVICE_TYPE_SWITCH)
    if a_switch and b_switch and p2p_nvlink_ok:
        return f"NV{min(a_switch, b_switch)}"
    return None


def _read_topology(lib: Any, reading: Reading, handles: list[Any], ends: list[list[NvLinkEnd]]) -> None:
    bus_ids = [(gpu.pci_bus_id or "").lower() for gpu in reading.gpus]
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            p2p_nvlink = _quiet(
                functools.partial(
                    _int, lib.nvmlDeviceGetP2PStatus, handles[a], handles[b], P2P_CAPS_INDEX_NVLINK
                )
            )
            link = nvlink_name(ends[a], ends[b], bus_ids[b], p2p_nvlink == P2P_STATUS_OK) if ends[a] else None
            if link is None:
                level = _try(
                    functools.partial(lib.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b]),
                    reading,
                    f"topology GPU {a}-{b}",
                )
                link = TOPOLOGY_LEVELS.get(int(level), "unknown") if level is not None else "unknown"
            p2p = _try(
                functools.partial(lib.nvmlDeviceGetP2PStatus, handles[a], handles[b], P2P_CAPS_INDEX_READ),
                reading,
                f"P2P status GPU {a}-{b}",
            )
            status = P2P_STATUS.get(int(p2p), "unknown") if p2p is not None else "unknown"
            reading.topology.append(Link(gpu_a=a, gpu_b=b, link=link, p2p_read=status))


P2P_CAPS_INDEX_READ, P2P_CAPS_INDEX_NVLINK = 0, 2  # nvml.h NVML_P2P_CAPS_INDEX_*


MODULE_VERSION = "/proc/driver/nvidia/version"  # there while NVIDIA's kernel module is loaded


def kernel_module_flavour(path: str = MODULE_VERSION) -> str | None:
    """Return "open" or "proprietary" from the loaded kernel module's banner, None when unreadable."""
    try:
        with open(path, errors="replace") as file:
            banner = file.read()
    except OSError:
        return None
    if "Open Kernel Module" in banner:
        return "open"
    return "proprietary" if "Kernel Module" in banner else None


def _compute_capability(pair: object) -> str:
    """ "9.0" of NVML's (major, minor); anything else (a recording edited by hand) raises, and is not read."""
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(type(v) is int and v >= 0 for v in pair)
    ):
        raise ValueError(f"not a (major, minor) pair of integers: {pair!r:.40}")
    return f"{pair[0]}.{pair[1]}"


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
