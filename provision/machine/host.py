"""Host facts that cost no subprocess: OS, kernel, glibc, Python, container or VM."""

from __future__ import annotations

import os
import platform
import sys

from provision.machine.facts import Host


def _text(path: str) -> str:
    with open(path) as file:
        return file.read()


def os_release(path: str = "/etc/os-release") -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in _text(path).splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key] = value.strip().strip('"')
    except OSError:
        pass
    return fields


def container(root: str = "/") -> str | None:
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    try:
        cgroup = _text(os.path.join(root, "proc/1/cgroup"))
    except OSError:
        return None
    for marker in ("kubepods", "docker", "containerd", "lxc"):
        if marker in cgroup:
            return marker
    return None


def virtualization(root: str = "/") -> str | None:
    """Return the hypervisor vendor where the DMI tables or the CPU flags tell it, else None."""
    try:
        vendor = _text(os.path.join(root, "sys/class/dmi/id/sys_vendor")).strip()
    except OSError:
        vendor = ""
    known = {
        "QEMU": "kvm",
        "KVM": "kvm",
        "Amazon EC2": "kvm",
        "Microsoft Corporation": "hyperv",
        "VMware": "vmware",
        "Xen": "xen",
        "Google": "kvm",
        "Firecracker": "firecracker",
    }
    for marker, name in known.items():
        if vendor.startswith(marker):
            return name
    try:
        with open(os.path.join(root, "proc/cpuinfo")) as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return "unknown hypervisor" if " hypervisor" in line else None
    except OSError:
        pass
    return None


def read() -> Host:
    release = os_release()
    uname = platform.uname()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        libc = ""
    return Host(
        os=release.get("NAME") or uname.system,
        os_version=release.get("VERSION_ID") or release.get("VERSION"),
        kernel=uname.release,
        arch=uname.machine,
        glibc=libc.split()[-1] if libc.startswith("glibc") else None,
        python=platform.python_version(),
        python_path=sys.executable,
        container=container(),
        virtualization=virtualization(),
    )
