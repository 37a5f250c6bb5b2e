"""What a lock says of itself: the CUDA release it was made for, its own compiler and FlashInfer's arch list, written by
`provision lock` into `[tool.provision]`, so that `report --lock` judges the driver, compiler and torch gates from the
lock alone, wherever its profile is. A lock from before that (no `cuda` key) falls back to its profile when it is
found, then to what its wheels say (torch's +cuXYZ, NVIDIA's CUDA-versioned wheels); else its CUDA is unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.pylock import Pylock
from packaging.utils import canonicalize_name
from packaging.version import Version

from provision.stacks.profiles import Package, Profile

if TYPE_CHECKING:
    from provision.stacks.lockfile import Stamp

# Distributions whose version is the CUDA release they belong to (NVIDIA's toolkit wheels and CUDA Python).
CUDA_VERSIONED = (
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-nvcc-cu12",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-nvrtc-cu12",
    "nvidia-nvjitlink",
    "nvidia-nvjitlink-cu12",
)
_LOCAL_CUDA = re.compile(r"^cu(\d{2,3})$")


@dataclass(frozen=True, kw_only=True)
class LockStack:
    # what the gates judge: the lock's own description (or its profile); None: CUDA unknown
    profile: Profile | None
    source: str  # where the CUDA release came from, said in the report


def describe(path: Path, pylock: Pylock, stamp: Stamp, found: Profile | None) -> LockStack:
    """The stack the lock at `path` describes. `found` is the profile of the lock's name on this machine, if any: it is
    used whole only when it is the very profile the lock was made from (same content hash)."""
    name = stamp.profile or path.stem.removeprefix("pylock.") or "lock"
    if found is not None and stamp.profile_hash and found.content_hash == stamp.profile_hash:
        return LockStack(
            profile=found, source=f"profile {found.name} ({found.path}), the one the lock was made from"
        )
    if re.fullmatch(r"\d+\.\d+", stamp.cuda):
        return LockStack(
            profile=_own(name, path, pylock, stamp, stamp.cuda), source="the lock's [tool.provision] cuda"
        )
    if found is not None:
        return LockStack(
            profile=found, source=f"profile {found.name} ({found.path}); the lock does not say its CUDA"
        )
    inferred = from_wheels(pylock)
    if inferred:
        cuda, why = inferred
        return LockStack(
            profile=_own(name, path, pylock, stamp, cuda),
            source=f"the lock's wheels ({why}); the lock does not say its CUDA",
        )
    return LockStack(profile=None, source="")


def _own(name: str, path: Path, pylock: Pylock, stamp: Stamp, cuda: str) -> Profile:
    """A profile made of what the lock holds, enough for the gates: torch and FlashInfer as locked, its own compiler."""
    locked = {str(canonicalize_name(p.name)): p.version for p in pylock.packages}
    packages = [Package(name="torch", version=f"=={locked['torch']}")] if locked.get("torch") else []
    if locked.get("flashinfer-python"):
        packages.append(Package(name="flashinfer-python", version=f"=={locked['flashinfer-python']}"))
    if re.fullmatch(r"\d+\.\d+", stamp.compiler_cuda):
        packages.append(Package(name="nvidia-cuda-nvcc", version=f"=={stamp.compiler_cuda}"))
    env = {"FLASHINFER_CUDA_ARCH_LIST": stamp.flashinfer_arch_list} if stamp.flashinfer_arch_list else {}
    return Profile(name=name, path=path, cuda=cuda, packages=tuple(packages), env=env, serves=stamp.serves)


def from_wheels(pylock: Pylock) -> tuple[str, str] | None:
    """The CUDA release the lock's wheels are built for, and which wheel says so: torch's local version (+cu130),
    else an NVIDIA wheel whose version is its CUDA release."""
    for package in pylock.packages:
        if str(canonicalize_name(package.name)) == "torch" and package.version and package.version.local:
            match = _LOCAL_CUDA.match(package.version.local)
            if match:
                digits = match.group(1)
                return f"{digits[:-1]}.{digits[-1]}", f"torch {package.version}"
    for package in pylock.packages:
        if str(canonicalize_name(package.name)) in CUDA_VERSIONED and package.version:
            version = Version(str(package.version))
            return f"{version.major}.{version.minor}", f"{package.name} {package.version}"
    return None
