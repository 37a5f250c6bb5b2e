"""Scripts that uv generated in restore's staging copy name that copy's python in their first lines; the copy is about
to become the venv, so they must name the venv's. Their RECORD rows follow, so that drift still finds them intact."""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

from packaging.utils import canonicalize_name

from provision import regular
from provision.atomic import write_atomic
from provision.envs import filehash

HEAD = 1024  # a shebang, or uv's /bin/sh "exec" trampoline for long paths, lies within the first lines


def scripts(staging: Path, venv: Path, names: list[str]) -> list[str]:
    """Rewrite `staging` to `venv` in the scripts of distributions `names`; return the RECORD paths rewritten."""
    # METADATA read as drift reads it: another distribution's pipe or Latin-1 METADATA is read past, never waited on
    from provision.envs.drift import distribution_name
    from provision.envs.home import site_packages

    site = site_packages(staging)
    old, new = os.fsencode(staging), os.fsencode(venv)
    wanted = set(names)
    rewritten = []
    for info in sorted(site.glob("*.dist-info")):
        name = distribution_name(info)
        if not name or str(canonicalize_name(name)) not in wanted or not (info / "RECORD").is_file():
            continue
        rows = list(csv.reader(io.StringIO(regular.read_text(info / "RECORD"))))
        changed = False
        for row in rows:
            if len(row) < 3 or not row[1]:
                continue
            path = Path(os.path.normpath(site / row[0]))
            if path.parent != staging / "bin" or not path.is_file():
                continue
            data = path.read_bytes()
            if old not in data[:HEAD]:
                continue
            data = data[:HEAD].replace(old, new) + data[HEAD:]
            temp = path.with_name(f".{path.name}.relocate")
            temp.write_bytes(data)
            shutil.copymode(path, temp)
            os.replace(temp, path)  # a new inode: nothing shared with the venv or uv's cache is written
            row[1], row[2] = filehash.record_digest(path, row[1].split("=", 1)[0]), str(len(data))
            rewritten.append(row[0])
            changed = True
        if changed:
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(rows)
            write_atomic(info / "RECORD", text.getvalue())
    return rewritten
