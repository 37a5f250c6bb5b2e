"""Every package of the profile imports; import names come from the installed distribution's own files."""

from __future__ import annotations

import importlib
import re
from importlib import metadata

from _common import arguments, crash_reason, emit


def import_names(distribution: str) -> list[str]:
    dist = metadata.distribution(distribution)
    top = dist.read_text("top_level.txt")
    if top:
        return sorted({line.strip() for line in top.splitlines() if line.strip() and not line.startswith("_")})
    names = set()
    for file in dist.files or []:
        parts = file.parts
        if not parts or parts[0].endswith((".dist-info", ".data")) or parts[0] in ("..", "bin", "__pycache__"):
            continue
        if len(parts) > 1 and parts[-1] == "__init__.py" and len(parts) == 2:
            names.add(parts[0])
        elif len(parts) == 1 and re.match(r"^[A-Za-z_]\w*(\.cpython.*)?\.(py|so)$", parts[0]):
            names.add(parts[0].split(".")[0])
        elif len(parts) > 1 and re.match(r"^[A-Za-z_]\w*$", parts[0]):
            names.add(parts[0])  # a namespace package such as nvidia/
    return sorted(n for n in names if not n.startswith("_"))


def main() -> None:
    args = arguments()
    tried, failed, none = [], [], []
    for distribution in args.get("packages") or []:
        try:
            names = import_names(distribution)
        except metadata.PackageNotFoundError:
            failed.append(f"{distribution}: not installed")
            continue
        if not names:
            none.append(distribution)
        for name in names:
            try:
                importlib.import_module(name)
                tried.append(name)
            except BaseException as exc:  # an extension that crashes on import is the finding
                failed.append(f"{distribution} ({name}): {crash_reason(exc)}")
    if failed:
        emit("fail", "; ".join(failed)[:800], imported=tried)
    emit("pass", f"imported {', '.join(tried) or 'nothing'}" + (f"; no module in {', '.join(none)}" if none else ""), imported=tried)


main()
