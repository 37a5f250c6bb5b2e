"""What a probe learns about a machine: typed records that round-trip to the `probe --json` document.

Named tuples, immutable and typed as frozen dataclasses are, but made at import far more cheaply: a dataclass is
generated at import, and `probe` is a short process as a whole (the scan's records and render's blocks are named tuples
for the same reason). Build them by keyword; `_replace` gives a changed copy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class NvmlStart(NamedTuple):
    """How NVML's start (nvmlInit) went: `ok`, or why no GPU was read and what to do (machine/nvmlstart.py)."""

    # ok | no_driver | library_missing | version_mismatch | no_permission | driver_not_loaded | timeout | crashed |
    # not_asked | failed;
    # unknown: a probe document from before this was read
    state: str = "unknown"
    error: str | None = None  # the NVML error nvidia-ml-py raised, by its constant's name
    reason: str | None = None  # what it means
    hint: str | None = None  # what to do

    @property
    def silent(self) -> bool:
        """A driver is installed but does not answer: GPU checks are ERROR and the driver gate FAILs, never SKIP."""
        return self.state not in ("ok", "no_driver", "unknown")


class Driver(NamedTuple):
    version: str | None = None
    cuda: str | None = None  # newest CUDA the driver supports, "13.1"
    cuda_raw: int | None = None  # NVML's encoding, 13010
    kernel_module: str | None = None  # "open" | "proprietary"
    nvml_version: str | None = None
    nvml: NvmlStart = NvmlStart()


class Pcie(NamedTuple):
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


class Fabric(NamedTuple):
    """A GPU's NVSwitch fabric registration as NVML answers it (nvmlDeviceGetGpuFabricInfoV): `state` not_started,
    in_progress or completed; `status` the NVML return code of the registration once completed (0: success)."""

    state: str  # not_started | in_progress | completed | unknown
    status: int | None = None
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health_mask: int | None = None


class Gpu(NamedTuple):
    index: int  # type: ignore[assignment]  # the JSON key; shadows tuple.index, which nothing calls on a Gpu
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None  # "12.0"
    sm: str | None = None  # "sm_120"
    architecture: str | None = None
    memory_total_bytes: int | None = None
    pcie: Pcie = Pcie()
    nvlink_active_links: int = 0
    nvlink_supported: bool = False
    mig_mode: str | None = None  # "enabled" | "disabled" | None when not supported
    persistence_mode: bool | None = None
    fabric: Fabric | None = (
        None  # None: NVML has no fabric for this GPU (NotSupported: PCIe, H100 PCIe) or no such call
    )


class Link(NamedTuple):
    """How two GPUs reach each other, as `nvidia-smi topo -m` and `-p2p r` would say."""

    gpu_a: int
    gpu_b: int
    link: str  # NV#, PIX, PXB, PHB, NODE, SYS
    p2p_read: str  # ok, not_supported, ...
    bridges: tuple[str, ...] = ()  # the PCI bridges between the two (machine/pci.py: pair_path), by address


class Toolkit(NamedTuple):
    version: str  # "13.0"
    path: str
    nvcc: str
    found_by: tuple[str, ...] = ()
    sms: tuple[str, ...] = ()  # real targets, as `nvcc --list-gpu-code` prints them
    ptx: tuple[str, ...] = ()  # virtual targets, `nvcc --list-gpu-arch`
    full_version: str | None = None  # "13.0.88"


class Host(NamedTuple):
    os: str | None = None
    os_version: str | None = None
    kernel: str | None = None
    arch: str | None = None
    glibc: str | None = None
    python: str | None = None
    python_path: str | None = None
    container: str | None = None
    virtualization: str | None = None


class Acs(NamedTuple):
    """A port's Access Control Services registers (PCIe 6.0, 7.7.8), and its control bits as lspci's ACSCtl names
    them. `capability` says which features the port has, `control` which are on."""

    capability: int
    control: int
    src_valid: bool = False
    trans_blk: bool = False
    req_redir: bool = False
    cmplt_redir: bool = False
    upstream_fwd: bool = False
    egress_ctrl: bool = False
    direct_trans: bool = False

    @property
    def redirects(self) -> list[str]:
        """The control bits that send peer-to-peer requests up to the root complex (Linux's p2pdma counts these)."""
        return [name for name in ("req_redir", "cmplt_redir", "egress_ctrl") if getattr(self, name)]


class Bridge(NamedTuple):
    """A PCI bridge above a GPU, read from its configuration space."""

    bdf: str  # "0000:15:01.0", as sysfs and lspci -D name it
    vendor_id: str | None = None  # "8086"
    device_id: str | None = None
    port_type: str | None = (
        None  # "root port", "switch downstream port", ... (PCIe capability; needs 256 bytes)
    )
    config_bytes: int = (
        0  # bytes of configuration space read: 64 without root, 256 without extended space, 4096
    )
    acs: Acs | None = None  # None: no ACS capability, or (config_bytes < 4096) not readable


class GpuPath(NamedTuple):
    """Where a GPU sits on the PCI tree and whether an IOMMU translates its DMA."""

    gpu: int
    bdf: str | None = None
    sysfs_path: str | None = None
    bridges: tuple[str, ...] = ()  # from the root down to the GPU
    iommu_group: int | None = None
    iommu_domain: str | None = None  # the group's type: identity, DMA, DMA-FQ, ...
    iommu: str = "unknown"  # off | passthrough | translated | blocked | unknown


class Iommu(NamedTuple):
    mode: str = "unknown"  # off | passthrough | translated | mixed | unknown (over the GPUs)
    reason: str = ""
    units: tuple[str, ...] = ()  # /sys/class/iommu: dmar0, ivhd0, ...
    groups: int | None = None  # how many /sys/kernel/iommu_groups there are
    cmdline: tuple[str, ...] = ()  # the kernel's IOMMU and ACS options: intel_iommu=on, iommu=pt, ...


class Pci(NamedTuple):
    """The facts that decide P2P over PCIe: the IOMMU, and every bridge above a GPU with its ACS bits."""

    read: bool = (
        False  # False: nothing was read (no sysfs, or a document or recording from before these facts)
    )
    iommu: Iommu = Iommu()
    gpus: tuple[GpuPath, ...] = ()
    bridges: tuple[Bridge, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pci:
        iommu = data.get("iommu") or {}
        bridges = [
            {**b, "acs": _build(Acs, b["acs"]) if b.get("acs") else None} for b in data.get("bridges") or []
        ]
        return cls(
            read=bool(data.get("read")),
            iommu=_build(
                Iommu,
                {
                    **iommu,
                    "units": tuple(iommu.get("units") or ()),
                    "cmdline": tuple(iommu.get("cmdline") or ()),
                },
            ),
            gpus=tuple(
                _build(GpuPath, {**g, "bridges": tuple(g.get("bridges") or ())})
                for g in data.get("gpus") or []
            ),
            bridges=tuple(_build(Bridge, b) for b in bridges),
        )


class MachineFacts(NamedTuple):
    driver: Driver = Driver()
    gpus: tuple[Gpu, ...] = ()
    topology: tuple[Link, ...] = ()
    toolkits: tuple[Toolkit, ...] = ()
    host: Host = Host()
    pci: Pci = Pci()
    notes: tuple[str, ...] = ()
    source: str = "live"  # "live" or the recorded file's path

    def to_dict(self) -> dict[str, Any]:
        data = _plain(self)
        assert isinstance(data, dict)
        data.pop("source")
        return data

    @property
    def pcie_only(self) -> bool:
        """True when no two GPUs share an NVLink (every link is a PCIe path)."""
        return all(not link.link.startswith("NV") for link in self.topology) and not any(
            gpu.nvlink_active_links for gpu in self.gpus
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> MachineFacts:
        """Rebuild facts from a `probe --json` document; unknown keys are ignored so newer files still load."""
        driver = data.get("driver") or {}
        return cls(
            driver=_build(Driver, {**driver, "nvml": _build(NvmlStart, driver.get("nvml") or {})}),
            gpus=tuple(
                _build(
                    Gpu,
                    {
                        **g,
                        "pcie": _build(Pcie, g.get("pcie") or {}),
                        "fabric": _build(Fabric, g["fabric"]) if g.get("fabric") else None,
                    },
                )
                for g in data.get("gpus") or []
            ),
            topology=tuple(
                _build(Link, {**link, "bridges": tuple(link.get("bridges") or ())})
                for link in data.get("topology") or []
            ),
            toolkits=tuple(
                _build(Toolkit, {**t, **{k: tuple(t.get(k) or ()) for k in ("found_by", "sms", "ptx")}})
                for t in data.get("toolkits") or []
            ),
            host=_build(Host, data.get("host") or {}),
            pci=Pci.from_dict(data.get("pci") or {}),
            notes=tuple(data.get("notes") or ()),
            source=source,
        )


def _build(cls: type[T], data: Mapping[str, object]) -> T:
    """A `cls` from the keys of `data` it has (a newer document's extra keys are passed over)."""
    names: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009 - every record here is a named tuple
    return cls(**{k: v for k, v in data.items() if k in names})


def _plain(value: object) -> object:
    """What dataclasses.asdict gives: a record as a dict, records inside it too (tuples stay tuples)."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value
