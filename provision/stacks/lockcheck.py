"""Two ways a lock is broken before anything is installed, decided from the lock and its wheels' RECORDs alone:
two wheels that install the same path with different contents (the second overwrites the first: cuda-python 12.6
beside cuda-bindings 13 leaves `cuda/bindings/` half of each), and NVIDIA libraries of two CUDA majors side by side
(nvidia-*-cu12 beside CUDA 13 wheels, pytorch/pytorch#186591). `report --lock` FAILs either; `lock` warns."""

from __future__ import annotations

import csv
import io
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

# Distributions whose version major is the CUDA major they are built for (nvidia-cublas 13.0.0.19 is CUDA 13.0's
# cuBLAS; nvidia-cufft 12.0.0 is CUDA 13.0's too, so the other math libraries are not here).
CUDA_VERSIONED = (
    "cuda-toolkit",
    "cuda-python",
    "cuda-bindings",
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-nvrtc",
    "nvidia-nvjitlink",
    "nvidia-cuda-cupti",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-nvtx",
    "nvidia-cublas",
)
# Families NVIDIA installs for both CUDA majors side by side, one picked at run time: nvidia-cutlass-dsl 4.8.0 requires
# nvidia-cutlass-dsl-libs-cu12 always and -libs-cu13 with its cu13 extra (its Requires-Dist).
PER_MAJOR = ("nvidia-cutlass-dsl-libs-",)
# A part of a distribution's name that names its CUDA build: nvidia-cublas-cu12, tensorrt-cu12(-libs), cupy-cuda12x,
# jax-cuda12-plugin, cupy-cuda117 (CUDA 11.7); a local version: +cu130, +cu12, +cu118.
_PART = re.compile(r"^cu(?:da)?(\d{2,3})(x?)$")
_LOCAL = re.compile(r"^cu(\d{2,3})$")
# Where each scheme of a wheel's NAME.data/ folder lands, from site-packages (PEP 427; sysconfig's venv layout).
SCHEMES = {"purelib": "", "platlib": "", "scripts": "../bin/", "headers": "../include/", "data": "../"}
_SITE = re.compile(r"^\.\./lib(?:64)?/python3\.\d+/site-packages/")  # a data file that lands in site-packages
_NO_HASH = ""


@dataclass(frozen=True, kw_only=True)
class Conflict:
    first: str  # wheel file names (or, for a write into a .dist-info of no wheel of the lock, that folder)
    second: str
    path: str  # one path both install, as it lands relative to site-packages
    count: int  # how many paths in all
    comparable: bool = (
        True  # False: hashed with different algorithms, so whether the contents differ cannot be told
    )
    why: str = "both install"

    @property
    def loose(self) -> bool:
        """Only lone top-level files (a build helper such as build_backend.py shipped by mistake): one overwrites the
        other, but no package of either is left half of each."""
        return "/" not in self.path and self.why == "both install"

    def rank(self) -> int:
        """The worst first: a package split or metadata written over (0), contents that cannot be compared (1), loose
        top-level files (2)."""
        return 2 if self.loose else 0 if self.comparable else 1

    def message(self) -> str:
        more = f" (and {self.count - 1} more)" if self.count > 1 else ""
        contents = (
            "with different contents"
            if self.comparable
            else "hashed with different algorithms in their RECORDs, so whether the contents differ cannot be told"
        )
        if self.why != "both install":
            return f"{self.second} {self.why} {self.path}{more}"
        return f"{self.first} and {self.second} both install {self.path}{more}, {contents}"


# what makes a path other than its own landing: an empty or dot segment anywhere, a first segment NAME.data; the
# empty path
_UNUSUAL = re.compile(r"//|(?:^|/)\.\.?(?:/|$)|^/|/$|^[^/]*\.data(?:/|$)|^$")
# what _UNUSUAL looks for, as text in a RECORD's paths joined by newlines (and one before and after): none of these in
# them, no path of them matches it (each alternative of _UNUSUAL shows as one of these, "\n" for ^ and $); found, the
# paths go the whole way. A search of each path cost as much as reading the RECORD
_UNUSUAL_TEXT = (
    "//",
    "/./",
    "/../",
    "\n./",
    "\n../",
    "\n.\n",
    "\n..\n",
    "/.\n",
    "/..\n",
    "/\n",
    "\n/",
    "\n\n",
    ".data/",
    ".data\n",
)


def _all_normal(paths: list[str]) -> bool:
    """Whether every one of these paths is its own landing and not under NAME.data/ (landing's shortcut, for all)."""
    joined = "\n" + "\n".join(paths) + "\n"
    return not any(text in joined for text in _UNUSUAL_TEXT)


def landing(path: str) -> str | None:
    """Where a RECORD path lands, relative to site-packages and normalized (`pkg/./x.py`, `pkg//x.py` and `./pkg/x.py`
    are one file; `NAME.data/purelib/x` and `NAME.data/data/lib/python3.12/site-packages/x` land beside the rest);
    None for an empty path."""
    if not _UNUSUAL.search(path):
        return path  # nearly every path: already normal, and not under NAME.data/
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        return None
    if parts[0].endswith(".data") and len(parts) > 2:
        where = SCHEMES.get(parts[1], f"../{parts[1]}/") + "/".join(parts[2:])
        return _SITE.sub("", posixpath.normpath(where))
    return posixpath.normpath("/".join(parts))


def installed(record: str | list[list[str]]) -> dict[str, str] | None:
    """path -> hash ("" where RECORD gives none) of every file a wheel's RECORD installs, where it lands relative to
    site-packages (`landing`); RECORD files themselves are left out (they carry no hash of themselves).
    None when it is no CSV that csv reads (a field past its 128 KiB limit): a wheel without a readable RECORD. `record`
    is its text, or its rows as kept in provision's records/ cache (stacks/wheelrecords.py)."""
    found: dict[str, str] = {}
    try:
        rows = list(csv.reader(io.StringIO(record))) if isinstance(record, str) else record
    except csv.Error:
        return None
    # nearly every RECORD lists paths already normal: one search over all of them spares a search of each
    normal = _all_normal([row[0] for row in rows if row and row[0]])
    for row in rows:
        if not row or not row[0]:
            continue
        path = row[0] if normal else landing(row[0])
        if path is None or (
            path.endswith("/RECORD") and path.count("/") == 1 and path.split("/")[0].endswith(".dist-info")
        ):
            continue
        found[path] = row[1] if len(row) > 1 else _NO_HASH
    return found


def _same(first: str, second: str) -> bool | None:
    """Whether two RECORD hashes name one content: compared like with like (`sha256=` with `sha256=`); None when the
    algorithms differ (nothing in a RECORD tells whether sha256 X and sha384 Y are one file) or either has none."""
    algorithm, _, digest = first.partition("=")
    other, _, other_digest = second.partition("=")
    if not digest or not other_digest:
        return False  # a file RECORD gives no hash for is never taken for another's
    if algorithm.lower() != other.lower():
        return None
    return digest == other_digest


def _own_name(wheel: str) -> str:
    try:
        return str(parse_wheel_filename(wheel)[0])
    except InvalidWheelFilename:
        return ""


def _info_name(folder: str) -> str:
    return str(canonicalize_name(folder.rsplit(".", 1)[0].split("-", 1)[0]))


def conflicts(records: dict[str, dict[str, str]]) -> list[Conflict]:
    """Every pair of wheels (by file name) that install one path with different contents (same hash: the same file,
    as NVIDIA's cu12 wheels each carry an empty nvidia/__init__.py), or a file where the other has a folder (`pkg`
    beside `pkg/x.py`), one Conflict per pair; and every wheel that writes into another distribution's .dist-info."""
    order = sorted(records)
    own = {wheel: _own_name(wheel) for wheel in order}
    names = {name: wheel for wheel, name in own.items()}
    claims, every = _claims(records, order)
    pairs: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    for path, wheels in claims.items():  # the first wheel's file, against each later one's
        first_digest = records[wheels[0]][path]
        for wheel in wheels[1:]:
            same = _same(first_digest, records[wheel][path])
            if not same:
                pairs.setdefault((wheels[0], wheel), []).append((path, same is not None))
    intrusions: list[Conflict] = []
    for wheel in order:
        foreign: dict[str, list[str]] = {}
        for path in [p for p in records[wheel] if ".dist-info/" in p] if own[wheel] else ():
            top = path.split("/", 1)[0]
            if top.endswith(".dist-info") and _info_name(top) != own[wheel]:
                foreign.setdefault(top, []).append(path)
        for folder, paths in sorted(foreign.items()):
            victim = names.get(_info_name(folder), folder)
            intrusions.append(
                Conflict(
                    first=victim,
                    second=wheel,
                    path=sorted(paths)[0],
                    count=len(paths),
                    why=f"writes into {folder}, the metadata of another distribution:",
                )
            )
    # a file where another wheel has a folder: one of them cannot be installed
    if not _folders(every).isdisjoint(every):
        owner: dict[str, str] = {}
        for wheel in order:
            for path in records[wheel]:
                owner.setdefault(path, wheel)
        for path, wheel in owner.items():
            parent = path.rpartition("/")[0]
            while parent:
                if parent in owner and owner[parent] != wheel:
                    key = tuple(sorted((owner[parent], wheel)))
                    pairs.setdefault((key[0], key[1]), []).append((f"{parent} (a file) and {path}", True))
                parent = parent.rpartition("/")[0]
    found = []
    for (a, b), listed in sorted(pairs.items()):
        comparable = [p for p, known in listed if known]
        shown = comparable or [p for p, _ in listed]
        # the path named is one inside a package where there is one: the reason it matters
        found.append(
            Conflict(
                first=a,
                second=b,
                path=sorted(shown, key=lambda p: ("/" not in p, p))[0],
                count=len(listed),
                comparable=bool(comparable),
            )
        )
    return intrusions + found


def _claims(records: dict[str, dict[str, str]], order: list[str]) -> tuple[dict[str, list[str]], set[str]]:
    """path -> the wheels that install it, in `order`, for every path two or more of them install; and every path any
    installs. Found by set operations over each wheel's paths (a stack's 74,000 paths, a few dozen shared), not a
    step per path."""
    every: set[str] = set()
    twice: set[str] = set()
    for wheel in order:
        paths = records[wheel].keys()
        twice.update(every.intersection(paths))
        every.update(paths)
    claims: dict[str, list[str]] = {path: [] for path in twice}
    for wheel in order if twice else ():
        for path in twice.intersection(records[wheel].keys()):
            claims[path].append(wheel)
    return claims, every


def _folders(paths: Iterable[str]) -> set[str]:
    """Every folder above these paths (each folder's own parents walked once)."""
    found: set[str] = set()
    for parent in {path.rpartition("/")[0] for path in paths}:
        while parent and parent not in found:
            found.add(parent)
            parent = parent.rpartition("/")[0]
    return found


KNOWN_MAX = 200  # a lock records at most this many shared paths (a stack of 207 wheels has one)


def known(records: dict[str, dict[str, str]]) -> list[dict[str, object]]:
    """Every path two or more wheels install with different hashes, for the lock to record (`known_conflicts`):
    `{"path", "installs": {distribution: RECORD hash}}`, sorted by path, KNOWN_MAX at most. Drift judges an untouched
    build by it: such a path is shared from the first install, and no restore changes that."""
    claims, _ = _claims(records, list(records))
    own = {wheel: _own_name(wheel) for wheel in records}
    shared: list[dict[str, object]] = []
    for path in sorted(claims):
        by: dict[str, str] = {}
        for wheel in claims[path]:
            if own[wheel]:
                by[own[wheel]] = records[wheel][path]  # a distribution's last hash of it counts
        if len(by) > 1 and len(set(by.values())) > 1:
            shared.append({"path": path, "installs": dict(sorted(by.items()))})
    return shared[:KNOWN_MAX]


def cuda_majors(packages: list[tuple[str, str]]) -> dict[int, list[str]]:
    """CUDA major -> the locked packages ("name version") that are built for it: a name with a CUDA part
    (nvidia-*-cuNN, tensorrt-cu12, cupy-cuda12x, jax-cuda12-plugin), a +cuXYZ local version, or an NVIDIA/CUDA
    Python distribution whose version major is its CUDA major. PER_MAJOR families are neither: they are meant to be
    installed for both majors at once."""
    majors: dict[int, list[str]] = {}
    for raw_name, raw_version in packages:
        name = str(canonicalize_name(raw_name))
        try:
            version = Version(raw_version)
        except InvalidVersion:
            continue
        if name.startswith(PER_MAJOR):
            continue
        major = next(
            (_major(m.group(1), m.group(2)) for part in name.split("-")[1:] if (m := _PART.match(part))), None
        )
        local = _LOCAL.match(version.local or "")
        if major is None and local:
            major = _major(local.group(1), "")
        if major is None and name in CUDA_VERSIONED:
            major = version.major
        if major is not None:
            majors.setdefault(major, []).append(f"{name} {raw_version}")
    return majors


def _major(digits: str, whole: str) -> int:
    """The CUDA major of `cu130`, `cu12`, `cuda12x`, `cuda117`, `cu92`: three digits are major and minor; two are the
    major alone from 10 on (`+cu12` is CUDA 12, never 1), else major and minor (`cu92`: 9.2); an `x` names the major."""
    if whole or (len(digits) == 2 and digits.startswith("1")):
        return int(digits)
    return int(digits[:-1])


def cuda_mix(packages: list[tuple[str, str]]) -> str:
    """What mixes CUDA majors in these (name, version) pairs, "" when nothing does."""
    majors = cuda_majors(packages)
    if len(majors) < 2:
        return ""
    return "; ".join(
        f"CUDA {major}: {', '.join(sorted(names)[:3])}{' ...' if len(names) > 3 else ''}"
        for major, names in sorted(majors.items())
    )
