"""Every package of the profile imports; import names come from the installed distribution's own files."""

from __future__ import annotations

import importlib
import re
import sys
from importlib import metadata

from _common import arguments, crash_reason, emit


def import_names(distribution: str) -> list[str]:
    dist = metadata.distribution(distribution)
    found = _from_files(dist)
    top = dist.read_text("top_level.txt")
    if top:
        listed = {line.strip() for line in top.splitlines() if line.strip() and not line.startswith("_")}
        return sorted(listed & set(found) if set(found) & listed else listed)
    return found


def _from_files(dist: metadata.Distribution) -> list[str]:
    names, loose = set(), set()
    for file in dist.files or []:
        parts = file.parts
        if (
            not parts
            or parts[0].endswith((".dist-info", ".data"))
            or parts[0] in ("..", "bin", "__pycache__")
        ):
            continue
        if len(parts) > 1 and parts[-1] == "__init__.py" and len(parts) == 2:
            names.add(parts[0])
        elif len(parts) == 1 and re.match(r"^[A-Za-z_]\w*(\.cpython.*)?\.(py|so)$", parts[0]):
            loose.add(parts[0].split(".")[0])
        elif len(parts) > 1 and re.match(r"^[A-Za-z_]\w*$", parts[0]):
            names.add(parts[0])  # a namespace package such as nvidia/
    # a loose top-level module beside a package is a build helper shipped by mistake (flashinfer-python 0.7.2's
    # build_backend.py runs a build when imported): the packages are what the distribution offers to import
    return sorted(n for n in (names or loose) if not n.startswith("_"))


# What `python -m sglang.launch_server` imports before it touches a GPU: the module itself (its own imports: server
# arguments, plugins, utilities), then the HTTP server it starts in the default mode (sglang/launch_server.py, run_server).
SERVER_ENTRY = ("sglang.launch_server", "sglang.srt.entrypoints.http_server")
LIBCUDA = "libcuda.so.1"


def driver_present() -> bool:
    """Whether the NVIDIA driver's libcuda.so.1 loads in this process."""
    import ctypes

    try:
        ctypes.CDLL(LIBCUDA)
    except OSError:
        return False
    return True


def wants_libcuda(exc: BaseException) -> bool:
    """Whether the failure is the dynamic loader not finding libcuda.so.1 (in the error or what caused it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if LIBCUDA in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def server_entry() -> list[str]:
    """The modules of SGLang's server entry point, where sglang is installed and has them."""
    import importlib.util

    try:
        metadata.distribution("sglang")
    except metadata.PackageNotFoundError:
        return []
    found = []
    for name in SERVER_ENTRY:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            found.append(name)  # its parent fails to import: importing it says why
    return found


def main() -> None:
    args = arguments()
    tried, failed, none, skipped = [], [], [], []
    modules: dict[str, dict[str, str]] = {}
    driver: bool | None = None
    wanted = [(d, n) for d in args.get("packages") or [] for n in _names(d, failed, none)]
    wanted += [("sglang", name) for name in server_entry()]
    for number, (distribution, name) in enumerate(wanted, 1):
        # what it imports, as it goes (the runner shows it): a whole SGLang stack's imports take minutes
        print(
            f"progress: importing {name} ({distribution}), {number} of {len(wanted)}",
            file=sys.stderr,
            flush=True,
        )
        try:
            importlib.import_module(name)
            tried.append(name)
            modules[name] = {"status": "pass", "reason": f"imported ({distribution})"}
        except BaseException as exc:  # an extension that crashes on import is the finding
            if driver is None:
                driver = driver_present()
            if not driver and wants_libcuda(exc):
                reason = f"needs {LIBCUDA}, the NVIDIA driver's, and this machine has none ({crash_reason(exc)[:200]})"
                skipped.append(f"{name} ({distribution})")
                modules[name] = {"status": "skip", "reason": reason}
                continue
            failed.append(f"{distribution} ({name}): {crash_reason(exc)}")
            modules[name] = {"status": "fail", "reason": crash_reason(exc)}
    skip_note = (
        f"; skipped {', '.join(skipped)}: they need {LIBCUDA} and this machine has no NVIDIA driver"
        if skipped
        else ""
    )
    if failed:
        emit("fail", ("; ".join(failed) + skip_note)[:800], imported=tried, modules=modules)
    if skipped and not tried:
        emit("skip", skip_note.removeprefix("; "), imported=tried, modules=modules)
    emit(
        "pass",
        f"imported {', '.join(tried) or 'nothing'}"
        + (f"; no module in {', '.join(none)}" if none else "")
        + skip_note,
        imported=tried,
        modules=modules,
    )


def _names(distribution: str, failed: list[str], none: list[str]) -> list[str]:
    try:
        names = import_names(distribution)
    except metadata.PackageNotFoundError:
        failed.append(f"{distribution}: not installed")
        return []
    if not names:
        none.append(distribution)
    return names


main()
