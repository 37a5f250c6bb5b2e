"""Find every CUDA toolkit on the machine and ask each nvcc which SMs it can target."""

from __future__ import annotations

import glob
import os
import re
import shutil
from typing import TYPE_CHECKING

from provision import proc
from provision.machine.threads import parallel_map

if TYPE_CHECKING:
    from provision.machine.facts import Toolkit

_RELEASE = re.compile(r"release (\d+\.\d+), V([\d.]+)")
NVCC_TIMEOUT = 20.0
# Where NVIDIA's pip wheels put nvcc inside a venv: nvidia-cuda-nvcc-cu12 (12.x) and nvidia-cuda-nvcc (13.x).
WHEEL_NVCC = ("nvidia/cuda_nvcc/bin/nvcc", "nvidia/cu13/bin/nvcc")


def candidates(
    venvs: tuple[str | os.PathLike[str], ...] = (), env: dict[str, str] | None = None
) -> dict[str, list[str]]:
    """Return {nvcc path (resolved): [how it was found]} in the order a user would look. Paths are strings (os.path,
    glob): `probe --json` loads no pathlib."""
    env = dict(os.environ) if env is None else env
    found: dict[str, list[str]] = {}

    def add(nvcc: str, how: str) -> None:
        if os.path.isfile(nvcc) and os.access(nvcc, os.X_OK):
            found.setdefault(os.path.realpath(nvcc), []).append(how)

    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            add(os.path.join(env[variable], "bin", "nvcc"), variable)
    on_path = shutil.which("nvcc", path=env.get("PATH"))
    if on_path:
        add(on_path, "PATH")
    for root in ("/usr/local", "/opt"):
        for folder in sorted(glob.glob(os.path.join(glob.escape(root), "cuda*"))):
            add(os.path.join(folder, "bin", "nvcc"), folder)
    for venv in (os.fspath(v) for v in venvs):
        for site in sorted(glob.glob(os.path.join(glob.escape(venv), "lib/python3*/site-packages"))):
            for relative in WHEEL_NVCC:
                add(os.path.join(site, relative), f"venv {venv}")
    return found


def describe(nvcc: str | os.PathLike[str], found_by: list[str]) -> Toolkit | str:
    """Return the toolkit behind `nvcc`, or a note saying why it could not be read. Its three questions are asked at
    once (each nvcc start costs tens of milliseconds, and the probe waits for the slowest toolkit)."""
    command = os.fspath(nvcc)
    version, codes, archs = parallel_map(
        lambda flag: proc.run([command, flag], timeout=NVCC_TIMEOUT),
        ("--version", "--list-gpu-code", "--list-gpu-arch"),
    )
    match = _RELEASE.search(version.stdout)
    if not version.ok or not match:
        return f"toolkit {nvcc}: `nvcc --version` gave no release ({version.tail(1) or 'no output'})"
    # the record's module is imported once the processes ran: the probe starts them before anything else
    from provision.machine.facts import Toolkit

    return Toolkit(
        version=match.group(1),
        full_version=match.group(2),
        path=os.path.dirname(os.path.dirname(command)),
        nvcc=command,
        found_by=tuple(found_by),
        sms=tuple(sorted(set(codes.stdout.split()), key=_sm_order)) if codes.ok else (),
        ptx=tuple(sorted(set(archs.stdout.split()), key=_sm_order)) if archs.ok else (),
    )


def find(venvs: tuple[str | os.PathLike[str], ...] = ()) -> tuple[list[Toolkit], list[str]]:
    """Return (toolkits, notes). nvcc processes run in parallel: each costs tens of milliseconds."""
    found = candidates(venvs)
    toolkits: list[Toolkit] = []
    notes: list[str] = []
    if not found:
        return toolkits, ["no CUDA toolkit found (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda*, /opt/cuda*)"]
    results = parallel_map(lambda item: describe(*item), found.items())
    from provision.machine.facts import Toolkit

    for result in results:
        (toolkits if isinstance(result, Toolkit) else notes).append(result)  # type: ignore[arg-type]
    return _without_wrappers(toolkits), notes


def _without_wrappers(toolkits: list[Toolkit]) -> list[Toolkit]:
    """One entry per toolkit: an nvcc that is a script (a distribution's /usr/bin/nvcc wrapper) and reports the same
    release as a real nvcc binary is that toolkit, found once more; its ways of being found join the real one's."""
    scripts = [t for t in toolkits if _is_script(t.nvcc)]
    real = [t for t in toolkits if not any(t is s for s in scripts)]
    wrappers = [s for s in scripts if any(r.full_version == s.full_version for r in real)]
    kept = []
    for toolkit in toolkits:
        if any(toolkit is w for w in wrappers):
            continue
        also = [
            how
            for w in wrappers
            if w.full_version == toolkit.full_version and toolkit in real
            for how in w.found_by
        ]
        kept.append(
            toolkit._replace(found_by=tuple(dict.fromkeys([*toolkit.found_by, *also]))) if also else toolkit
        )
    return kept


def _is_script(nvcc: str) -> bool:
    try:
        with open(nvcc, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def _sm_order(label: str) -> tuple[int, str]:
    digits = "".join(ch for ch in label if ch.isdigit())
    return (int(digits) if digits else 0, label)
