"""The SMs a profile's own compiler targets, from the compiler wheel itself: its `nvcc --list-gpu-code`, run once per
wheel (remembered by the wheel's sha256) when uv's cache holds that wheel unpacked; the cited table in knowledge.toml
otherwise, the offline fallback. Nothing is downloaded: `report --machine` stays fast and works offline."""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from provision import knowledge, proc, regular
from provision.errors import ProvisionError
from provision.stacks import uvcache

NVCC_PROJECTS = ("nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12")
NVCC_IN_WHEEL = ("nvidia/cu13/bin/nvcc", "nvidia/cuda_nvcc/bin/nvcc")
TIMEOUT = 20.0
NVCC_DOCS = "https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/"
MAX_ASKED = (
    2  # nvcc runs per report at most: a wheel that gave no answer is remembered as such, never asked again
)


@dataclass(frozen=True, kw_only=True)
class CompilerTargets:
    sms: tuple[str, ...]
    name: str  # "nvcc 13.0.88 from its wheel" or "nvcc 13.0 (table)"
    source: str


def memory_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "provision" / "nvcc-gpu-code.json"


@functools.cache
def targets(cuda: str, cache: Path | None) -> CompilerTargets | None:
    """What nvcc of CUDA release `cuda` ("13.0") targets: from its wheel in uv's cache at `cache`, else the table.
    Asked once per process: a report judges every profile on every machine, and uv's cache is read once."""
    found = _from_wheel(cuda, cache) if cache is not None and cache.is_dir() else None
    if found:
        return found
    sms = knowledge.toolkit_sms(cuda)
    if sms is None:
        return None
    row = next(r for r in knowledge.tables()["toolkit"] if r["cuda"] == ".".join(cuda.split(".")[:2]))
    return CompilerTargets(
        sms=tuple(sms),
        name=f"nvcc {cuda} (the table: no compiler wheel in uv's cache)",
        source=str(row["source"]),
    )


def _from_wheel(cuda: str, cache: Path) -> CompilerTargets | None:
    candidates = []
    for (project, stem), wheel in uvcache.wheels(cache, set(NVCC_PROJECTS)).items():
        if project not in NVCC_PROJECTS:
            continue
        try:
            version = Version(stem.split("-", 1)[0])
        except InvalidVersion:
            continue
        if f"{version.major}.{version.minor}" == cuda:
            candidates.append((version, wheel))
    asked = 0
    for version, wheel in sorted(candidates, key=lambda c: c[0], reverse=True):
        nvcc = next((wheel.archive / p for p in NVCC_IN_WHEEL if (wheel.archive / p).is_file()), None)
        key = min(wheel.sha256s(), default=str(wheel.archive))
        sms = _remembered(key)
        if sms is None and nvcc is not None and asked < MAX_ASKED:
            asked += 1
            sms = _ask(nvcc, key)
        if sms:
            return CompilerTargets(
                sms=tuple(sms),
                name=f"nvcc {version} from its wheel ({wheel.project} {version}, uv's cache)",
                source=f"{NVCC_DOCS} (--list-gpu-code), run once on the {wheel.project} {version} wheel in uv's "
                f"cache and remembered by its sha256 {key[:16]}",
            )
    return None


def _remembered(key: str) -> list[str] | None:
    """The SMs remembered for a wheel: a list (empty when its nvcc gave no answer), None when never asked."""
    try:
        value = json.loads(_own_bytes(memory_file())).get(key)
    except (OSError, ValueError, AttributeError, RecursionError):  # damaged, or another user's: asked again
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, str) and re.fullmatch(r"sm_\d+[a-z]?", v) for v in value
    ):
        return None
    return value


def _own_bytes(path: Path) -> bytes:
    """The file at `path` (not through a link), an OSError where it or its folder is another user's or writable by
    others (regular.foreign): what could have been planted there is asked again, never trusted."""
    with regular.open_file(path, follow=False) as handle:
        if regular.foreign(os.fstat(handle.fileno())) or regular.foreign(os.stat(path.parent)):
            raise OSError(f"{path}: another user could have written it")
        return handle.read(16 << 20)  # type: ignore[no-any-return]


def _ask(nvcc: Path, key: str) -> list[str] | None:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="provision-nvcc-") as folder:
        if not os.access(nvcc, os.X_OK):  # uv may unpack it without its execute bit; a private copy runs
            nvcc = Path(shutil.copy(nvcc, Path(folder) / "nvcc"))
            nvcc.chmod(0o700)
        try:
            done = proc.run([nvcc, "--list-gpu-code"], timeout=TIMEOUT)
        except (OSError, ProvisionError):
            return None
    sms = [w for w in done.stdout.split() if w.startswith("sm_")] if done.ok else []
    from provision.atomic import write_atomic

    path = memory_file()
    try:
        known = json.loads(_own_bytes(path))
    except (OSError, ValueError, RecursionError):
        known = {}
    if not isinstance(known, dict):  # another shape: forgotten, as a damaged file is
        known = {}
    known[key] = sms
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if regular.foreign(os.stat(path.parent)):
            return sms  # not written where another user could swap it
        write_atomic(path, json.dumps(known, indent=1, sort_keys=True))
    except OSError:
        pass  # remembering is an optimisation: a read-only home still gets the answer
    return sms or None
