"""Which interpreter `--python X.Y` means: the one uv's own discovery finds (uv-managed interpreters, then PATH), and
where pyenv keeps versions that are installed but not active (its shim for them exits 127, which stops uv's search),
the same discovery run over pyenv's version folders."""

from __future__ import annotations

import os
import re
from pathlib import Path

from provision import proc
from provision.errors import EnvError, InputError


def find_python(request: str) -> tuple[Path, str]:
    """Return (interpreter, "X.Y") for a version or a path; say how to get a missing one."""
    if os.sep in request:
        path = Path(request)
        if not path.exists():
            raise InputError(
                f"--python {request}: no such interpreter",
                "give a path to a python executable, or a version such as 3.12",
            )
        if not path.is_file() or not os.access(path, os.X_OK):
            raise InputError(
                f"--python {request}: {'a folder' if path.is_dir() else 'not an executable file'}, not an interpreter",
                "give the path of a python executable (say VENV/bin/python), or a version such as 3.12",
            )
    else:
        path = _discover(request)
    # -S: no site hooks (a sitecustomize.py or .pth that prints, a venv's banner): the version is all it prints
    version = proc.run([path, "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60)
    if not version.ok:
        raise EnvError(f"{path} did not run: {version.tail(1)}", "give another interpreter with --python")
    printed = version.stdout.strip()
    if not re.fullmatch(r"\d+\.\d+", printed):
        raise EnvError(
            f"{path} printed no Python version (it printed {printed[:60]!r})",
            "give the path of a python executable (say VENV/bin/python), or a version such as 3.12",
        )
    return path, printed


def _discover(request: str) -> Path:
    from provision.stacks import uvtool

    for search_path in (None, pyenv_search_path()):
        done = proc.run(
            [uvtool.binary(), "python", "find", request, "--no-project"],
            timeout=60,
            env=uvtool.environment({"PATH": search_path} if search_path else None),
        )
        if done.ok and done.stdout.strip():
            return Path(done.stdout.strip().splitlines()[-1])
        if search_path is None and pyenv_search_path() is None:
            break
    raise EnvError(
        f"Python {request} was not found on this machine (uv python find {request}, and pyenv's versions)",
        f"install it (uv python install {request}, your OS's python{request} package, or pyenv install {request}) "
        "or pass --python PATH",
    )


def pyenv_search_path() -> str | None:
    """PATH without pyenv's shims and with every installed pyenv version's bin/ after it, newest first; None without
    pyenv versions. uv's discovery over it finds what `pyenv install` put there, active or not."""
    from packaging.version import InvalidVersion, Version

    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    try:
        folders = [v for v in (root / "versions").iterdir() if (v / "bin").is_dir()]
    except OSError:
        return None

    def release(folder: Path) -> Version:
        try:
            return Version(folder.name)
        except InvalidVersion:  # miniconda3-latest, pypy3.10-7.3.12 ...: after the CPython releases
            return Version("0")

    folders.sort(key=lambda f: (release(f), f.name), reverse=True)
    if not folders:
        return None
    shims = str(root / "shims")
    kept = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p.rstrip("/") != shims]
    return os.pathsep.join(kept + [str(f / "bin") for f in folders])
