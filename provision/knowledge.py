"""Pure lookups over the cited tables in knowledge.toml: versions, SMs, drivers, what runs where."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

_LABEL = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")


@cache
def tables() -> dict[str, Any]:
    """Return knowledge.toml's tables, as knowledge.json holds them (written from it by scripts/knowledge_json.py, and
    checked equal by tests/report/test_knowledge.py): json's C scanner, so that `probe` imports no tomllib."""
    import json

    # beside this module in the package (importlib.resources would import tempfile, shutil and zipfile for it)
    with open(os.path.join(os.path.dirname(__file__), "knowledge.json"), encoding="utf-8") as file:
        data: dict[str, Any] = json.load(file)
    return data


def cuda_from_nvml(value: int) -> str:
    """Return "13.1" for NVML's 13010 (1000*major + 10*minor, nvml.h NVML_CUDA_DRIVER_VERSION_*)."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def sm_name(cc: str) -> str:
    """Return "sm_120" for compute capability "12.0"."""
    major, minor = cc.split(".")
    return f"sm_{major}{minor}"


def parse_label(label: str) -> tuple[str, int, int, str]:
    """Return (kind, major, minor, suffix) for "sm_120a", "compute_90", "lto_100"; ValueError otherwise."""
    match = _LABEL.match(label)
    if not match:
        raise ValueError(f"not an SM label: {label!r}")
    kind, digits, suffix = match.groups()
    return kind, int(digits[:-1]), int(digits[-1]), suffix


def parse_cc(cc: str) -> tuple[int, int]:
    major, minor = cc.split(".")
    return int(major), int(minor)


def arch_name(cc: str) -> str | None:
    for row in tables()["arch"]:
        if row["cc"] == cc:
            return str(row["name"])
    return None


def driver_minimum(cuda: str) -> str | None:
    for row in tables()["driver"]:
        if row["cuda"] == cuda:
            return str(row["minimum"])
    return None


def driver_source(cuda: str) -> str:
    for row in tables()["driver"]:
        if row["cuda"] == cuda:
            return str(row["source"])
    return "https://docs.nvidia.com/deploy/nvml-api/group__nvmlSystemQueries.html (nvmlSystemGetCudaDriverVersion: the newest CUDA the driver supports)"


def version_at_least(have: str, want: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(have) >= Version(want)
    except InvalidVersion:
        return False


def driver_supports(driver_cuda: str | None, target: str) -> bool:
    """Whether a driver that reports CUDA `driver_cuda` runs code built for CUDA `target`: it reports `target` or newer
    (the full feature set), or a CUDA of the same major where minor-version compatibility covers it ([[minor_compat]]:
    13.x on R580+, 12.x on R525+; a limited feature set, and no newer PTX: `ptx_too_new`)."""
    return driver_cuda is not None and (
        version_at_least(driver_cuda, target) or minor_compat(driver_cuda, target) is not None
    )


def minor_compat(driver_cuda: str | None, target: str) -> dict[str, Any] | None:
    """The [[minor_compat]] row under which a driver reporting the older CUDA `driver_cuda` of `target`'s major runs
    it; None where the driver reports `target` or newer, another major, or a major without minor-version compatibility."""
    if driver_cuda is None or version_at_least(driver_cuda, target):
        return None
    major = target.split(".")[0]
    if driver_cuda.split(".")[0] != major:
        return None
    return next((dict(r) for r in tables()["minor_compat"] if r["major"] == major), None)


def ptx_too_new(built_cuda: str | None, driver_cuda: str | None) -> bool:
    """Whether PTX made by CUDA `built_cuda` is newer than a driver reporting `driver_cuda` can JIT
    (cudaErrorUnsupportedPtxVersion): made by a newer toolkit than the driver's CUDA. Unknown either way: False."""
    return bool(built_cuda and driver_cuda) and not version_at_least(str(driver_cuda), str(built_cuda))


def cuda_of_local(version: str) -> str | None:
    """The CUDA release a wheel's local version tag names ("13.2" for 0.7.2+cu132, "12.8" for 2.9.1+cu128), else None."""
    match = re.search(r"\+cu(\d+)(\d)(?!\d)", version)
    if not match:
        return None
    major, minor = match.groups()
    return f"{int(major)}.{int(minor)}"


def toolkit_sms(cuda: str) -> list[str] | None:
    """Return the real SMs that nvcc of CUDA release `cuda` ("13.0") can target, or None when not tabled."""
    major_minor = ".".join(cuda.split(".")[:2])
    for row in tables()["toolkit"]:
        if row["cuda"] == major_minor:
            return list(row["sms"])
    return None


def torch_wheel_sms(cuda: str) -> list[str] | None:
    for row in tables()["torch_wheels"]:
        if row["cuda"] == cuda:
            return list(row["sms"])
    return None


def label_runs_on(label: str, cc: str) -> bool:
    """Whether code with entry label `label` (sm_90a, sm_120f, compute_120...) can run on a GPU of `cc`."""
    kind, major, minor, suffix = parse_label(label)
    dev_major, dev_minor = parse_cc(cc)
    if kind == "compute":
        return (dev_major, dev_minor) >= (major, minor)
    if kind != "sm":
        return False
    if suffix == "a":
        return (dev_major, dev_minor) == (major, minor)
    return dev_major == major and dev_minor >= minor


def flashinfer_arch_list(ccs: Iterable[str], nvcc: str | None) -> str:
    """Return FLASHINFER_CUDA_ARCH_LIST for GPUs of these compute capabilities ("9.0a 12.0f"), as FlashInfer picks it
    itself when the variable is unset; `nvcc` is the CUDA release of the compiler its JIT will use."""
    rule = gate("flashinfer_jit")
    entries = []
    for cc in sorted(set(ccs), key=parse_cc):
        major = cc.split(".")[0]
        suffix = rule["arch_suffix"].get(major, "")
        if suffix == "f" and not (nvcc and version_at_least(nvcc, rule["family_suffix_min_nvcc"])):
            suffix = "a"  # nvcc before 12.9 has no family targets: the arch-specific cubin is the workaround
        entries.append(f"{cc}{suffix}")
    return " ".join(entries)


def gate(name: str) -> dict[str, Any]:
    return dict(tables()["gates"][name])


def feature_fact(gate_name: str, package: str, version: str | None) -> tuple[dict[str, Any], bool]:
    """Return the [[feature_fact]] row of `gate_name` that holds for `package` at `version`, and whether it was chosen
    by that version: a version the rows do not cover, or none (the stack does not name the package), gets the first
    (oldest) row, and False."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    rows = [r for r in tables()["feature_fact"] if r["gate"] == gate_name and r["package"] == package]
    if not rows:
        raise KeyError(f"no [[feature_fact]] for {gate_name} and {package}")
    try:
        parsed = Version(version) if version else None
    except InvalidVersion:
        parsed = None
    if parsed is not None:
        for row in rows:
            if SpecifierSet(row["versions"]).contains(parsed, prereleases=True):
                return dict(row), True
    return dict(rows[0]), False


def newest_known(package: str) -> dict[str, Any] | None:
    """The newest release of `package` the knowledge has facts for ([[newest_known]]), None when it tracks none."""
    return next((dict(r) for r in tables()["newest_known"] if r["package"] == package), None)


def as_of() -> str:
    """The date of the newest fact (every row carries `as_of`, YYYY-MM-DD): what `report` says its knowledge is."""
    dates: list[str] = []
    for value in tables().values():
        rows = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        dates += [str(r["as_of"]) for r in rows if isinstance(r, dict) and "as_of" in r]
    return max(dates, default="")


def pin_for(package: str, version: str | None) -> dict[str, Any] | None:
    """The [[pin]] row of `package` at `version` (what it forces on the rest of a stack), None without one."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    for row in tables()["pin"]:
        if row["package"] == package and version:
            try:
                if SpecifierSet(row["versions"]).contains(Version(version), prereleases=True):
                    return dict(row)
            except InvalidVersion:
                return None
    return None


def feature_wheel(name: str) -> dict[str, str] | None:
    """The [[feature_wheel]] row of a distribution (normalized name): a wheel only some serving paths load; None else."""
    return next((dict(row) for row in tables().get("feature_wheel", []) if row["name"] == name), None)


def feature_names() -> list[str]:
    """Every feature a profile's `serves` may name."""
    return [row["feature"] for row in tables().get("feature_wheel", [])]
