"""Two ways a lock is broken before anything is installed, decided from the lock and its wheels' RECORDs alone:
two wheels that install the same path with different contents (the second overwrites the first: cuda-python 12.6
beside cuda-bindings 13 leaves `cuda/bindings/` half of each), and NVIDIA libraries of two CUDA majors side by side
(nvidia-*-cu12 beside CUDA 13 wheels, pytorch/pytorch#186591). `report --lock` FAILs either; `lock` warns."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

# Distributions whose version major is the CUDA major they are built for.
CUDA_VERSIONED = ("cuda-toolkit", "cuda-python", "cuda-bindings", "nvidia-cuda-runtime", "nvidia-cuda-nvcc", "nvidia-cuda-nvrtc",
                  "nvidia-nvjitlink", "nvidia-cuda-cupti", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-nvtx")
# Families NVIDIA installs for both CUDA majors side by side, one picked at run time: nvidia-cutlass-dsl 4.8.0 requires
# nvidia-cutlass-dsl-libs-cu12 always and -libs-cu13 with its cu13 extra (its Requires-Dist).
PER_MAJOR = ("nvidia-cutlass-dsl-libs-",)
_SUFFIX = re.compile(r"^(?:nvidia|cuda)-.+-cu(\d{2})$")
_LOCAL = re.compile(r"^cu(\d{2,3})$")
SCHEMES = {"purelib": "", "platlib": "", "scripts": "bin/", "headers": "include/", "data": "../"}


@dataclass(frozen=True, kw_only=True)
class Conflict:
    first: str  # wheel file names
    second: str
    path: str  # one path both install, as it lands relative to site-packages
    count: int  # how many paths in all

    @property
    def loose(self) -> bool:
        """Only lone top-level files (a build helper such as build_backend.py shipped by mistake): one overwrites the
        other, but no package of either is left half of each."""
        return "/" not in self.path

    def message(self) -> str:
        more = f" (and {self.count - 1} more)" if self.count > 1 else ""
        return f"{self.first} and {self.second} both install {self.path}{more}, with different contents"


def installed(record: str | list[list[str]]) -> dict[str, str] | None:
    """path -> hash ("" where RECORD gives none) of every file a wheel's RECORD installs, where it lands relative to
    site-packages (a `.data/purelib/` file beside the rest, `.data/scripts/` in bin/); RECORD files are left out.
    None when it is no CSV that csv reads (a field past its 128 KiB limit): a wheel without a readable RECORD. `record`
    is its text, or its rows as kept in provision's records/ cache (stacks/wheelrecords.py)."""
    found: dict[str, str] = {}
    try:
        for row in csv.reader(io.StringIO(record)) if isinstance(record, str) else record:
            if not row or not row[0]:
                continue
            path = row[0]
            parts = path.split("/")
            if parts[0].endswith(".dist-info"):
                continue  # named after the distribution: never shared
            if parts[0].endswith(".data") and len(parts) > 2:
                path = SCHEMES.get(parts[1], f"{parts[1]}/") + "/".join(parts[2:])
            found[path] = row[1] if len(row) > 1 else ""
    except csv.Error:
        return None
    return found


def conflicts(records: dict[str, dict[str, str]]) -> list[Conflict]:
    """Every pair of wheels (by file name) that install one path with different contents (same hash: the same file,
    as NVIDIA's cu12 wheels each carry an empty nvidia/__init__.py), one Conflict per pair."""
    owner: dict[str, tuple[str, str]] = {}
    pairs: dict[tuple[str, str], list[str]] = {}
    for wheel in sorted(records):
        for path, digest in records[wheel].items():
            if path not in owner:
                owner[path] = (wheel, digest)
                continue
            first, first_digest = owner[path]
            if first != wheel and not (digest and digest == first_digest):
                pairs.setdefault((first, wheel), []).append(path)
    # the path named is one inside a package where there is one: the reason it matters
    return [Conflict(first=a, second=b, path=sorted(paths, key=lambda p: ("/" not in p, p))[0], count=len(paths))
            for (a, b), paths in sorted(pairs.items())]


def cuda_majors(packages: list[tuple[str, str]]) -> dict[int, list[str]]:
    """CUDA major -> the locked packages ("name version") that are built for it: an nvidia-*-cuNN name, a +cuXYZ local
    version, or an NVIDIA/CUDA Python distribution whose version major is its CUDA major. PER_MAJOR families are
    neither: they are meant to be installed for both majors at once."""
    majors: dict[int, list[str]] = {}
    for raw_name, raw_version in packages:
        name = str(canonicalize_name(raw_name))
        try:
            version = Version(raw_version)
        except InvalidVersion:
            continue
        major = None
        suffix = _SUFFIX.match(name)
        local = _LOCAL.match(version.local or "")
        if name.startswith(PER_MAJOR):
            continue
        if suffix:
            major = int(suffix.group(1))
        elif local:
            major = int(local.group(1)[:-1])
        elif name in CUDA_VERSIONED:
            major = version.major
        if major is not None:
            majors.setdefault(major, []).append(f"{name} {raw_version}")
    return majors


def cuda_mix(packages: list[tuple[str, str]]) -> str:
    """What mixes CUDA majors in these (name, version) pairs, "" when nothing does."""
    majors = cuda_majors(packages)
    if len(majors) < 2:
        return ""
    return "; ".join(f"CUDA {major}: {', '.join(sorted(names)[:3])}{' ...' if len(names) > 3 else ''}"
                     for major, names in sorted(majors.items()))
