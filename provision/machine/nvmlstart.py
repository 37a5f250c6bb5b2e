"""Why NVML did not start, told apart: each failure of nvmlInit named, said in a line, with what to do.

A driver that is not there (`no_driver`) is a machine without GPUs: GPU checks SKIP. Every other failure is a driver
that is installed but does not answer (a 570 -> 590 upgrade without a reboot answers NVML_ERROR_LIB_RM_VERSION_MISMATCH):
GPU checks are ERROR, `create` does not activate and the report's driver gate FAILs (`NvmlStart.silent`).
"""

from __future__ import annotations

from provision.machine.facts import NvmlStart

# nvidia-ml-py's constant (pynvml.NVML_ERROR_*, the codes of nvml.h's nvmlReturn_t) -> the failure's kind
KIND_OF_ERROR = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": "no_driver",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "version_mismatch",
    "NVML_ERROR_NO_PERMISSION": "no_permission",
    "NVML_ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
    "NVML_ERROR_TIMEOUT": "timeout",
}
# kind -> (what it means, what to do)
KINDS = {
    "no_driver": (
        "no NVIDIA driver on this machine (NVML's library libnvidia-ml.so.1 is not found)",
        "install the NVIDIA driver to use GPUs here; nothing else needs one",
    ),
    "library_missing": (
        "the NVIDIA kernel module is loaded but NVML's library libnvidia-ml.so.1 is not found",
        "install the driver's user-space libraries of the loaded module's version; in a container, "
        "start it with the NVIDIA runtime (docker run --gpus all)",
    ),
    "version_mismatch": (
        "the driver's library and its loaded kernel module are different versions (a driver "
        "installed or upgraded without a reboot)",
        "reboot, or reload the module: stop what uses the GPUs, then rmmod nvidia_uvm nvidia_drm "
        "nvidia_modeset nvidia and modprobe nvidia",
    ),
    "no_permission": (
        "this user may not open the GPUs (/dev/nvidia*)",
        "run as a user allowed to open /dev/nvidia* (often the video group), or fix their permissions",
    ),
    "driver_not_loaded": (
        "the NVIDIA driver is installed but its kernel module is not loaded",
        "load it (sudo modprobe nvidia) and read dmesg for why it was not (Secure Boot, a kernel "
        "without its module)",
    ),
    "timeout": (
        "the driver did not answer NVML's start in time",
        "read nvidia-smi and dmesg (Xid errors, a GPU fallen off the bus); PROVISION_NVML_START_TIMEOUT "
        "sets the wait",
    ),
    "crashed": (
        "NVML's library killed the process that read it (a reading died inside NVML before, and a child that "
        "read it again died too)",
        "a broken or mismatched libnvidia-ml.so.1: see which one loads (ldconfig -p | grep nvidia-ml; a CUDA "
        "toolkit's stubs/ folder or another driver's libraries on LD_LIBRARY_PATH, a container's mounted driver "
        "files) and that nvidia-smi runs; provision reads NVML in a child first until one reads it cleanly",
    ),
    "not_asked": (
        "NVML was not asked: a reading died inside NVML before, so it is read in a child first, and no child could "
        "be started",
        "the machine is out of processes or memory (ulimit -u, free -m): free some and run again; NVML is not "
        "read in this process while a crash is suspected",
    ),
    "failed": ("NVML failed to start", "read nvidia-smi and dmesg for why"),
}
OK = NvmlStart(state="ok")


def started(kind: str, error: str | None = None, detail: str = "") -> NvmlStart:
    """The NvmlStart of a failure of `kind`; `detail` is added to its reason (the error's own text, the wait)."""
    reason, hint = KINDS[kind]
    return NvmlStart(state=kind, error=error, reason=reason + (f" ({detail})" if detail else ""), hint=hint)


def of_error(code: int | None, name: str | None, module_loaded: bool) -> NvmlStart:
    """What nvmlInit's error means: `code` as nvidia-ml-py raised it (NVMLError.value, None for an exception of
    another kind, `name` then its class). Library-not-found with the kernel module loaded is no "no driver"."""
    constant = error_name(code) if code is not None else None
    kind = KIND_OF_ERROR.get(constant or "", "failed")
    if kind == "no_driver" and module_loaded:
        kind = "library_missing"
    detail = "" if kind != "failed" else (constant or name or "")
    return started(kind, constant, detail)


def error_name(code: int) -> str:
    """nvidia-ml-py's name of an NVML error code ("NVML_ERROR_LIB_RM_VERSION_MISMATCH"), or "NVML error N"."""
    import pynvml

    names = [
        n for n, v in vars(pynvml).items() if n.startswith("NVML_ERROR_") and v == code and type(v) is int
    ]
    return names[0] if names else f"NVML error {code}"
