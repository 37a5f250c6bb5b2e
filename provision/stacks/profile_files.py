"""A profile's [files]: each site-packages path a file beside the profile is written to, checked strictly when the
profile is loaded (exit 4): a path that stays in site-packages, a source that stays beside the profile and is a
regular file (a pipe is refused, never waited on; a link out of the profile's folder is never followed)."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from provision import confined, regular

if TYPE_CHECKING:
    from provision.errors import ProfileError

T = TypeVar("T")


class _Checker(Protocol):
    """What the profile loader's checker (stacks/profiles.py) gives [files]' parse: the profile's path, typed keys, the
    error naming a key. A protocol, so that this module, which profiles.py imports, imports nothing of it back."""

    path: Path

    def fail(self, key: str, expected: str) -> ProfileError: ...

    def typed(self, value: object, key: str, kind: type[T] | tuple[type[T], ...], expected: str) -> T: ...


MAX_BYTES = 64 << 20  # a patch, a .pth, an edited module: never a library
METADATA = (".dist-info", ".egg-info")


@dataclass(frozen=True, kw_only=True)
class ProfileFile:
    """One entry of [files]: a file beside the profile that create writes into site-packages."""

    path: str  # relative to site-packages, normalized
    source: Path  # the file beside the profile
    content: bytes
    mode: int  # its permission bits
    sha256: str


def parse(c: _Checker, written: object) -> tuple[ProfileFile, ...]:
    if written is None:
        return ()
    table: dict[str, object] = c.typed(
        written, "files", dict, 'a table of "path in site-packages" = "file beside the profile"'
    )
    folder = c.path.parent
    found = []
    for path, given in table.items():
        key = f'files."{path}"'
        _relative(
            c, key, path, "the path in site-packages", 'such as "sitecustomize.py" or "sglang/srt/patch.py"'
        )
        if path.split("/")[0].endswith(METADATA):
            raise c.fail(
                key,
                f"{path!r} lies in a distribution's metadata; carry your own files, not a RECORD or METADATA",
            )
        source = c.typed(
            given, key, str, 'the path of a file beside the profile, such as "patches/sitecustomize.py"'
        )
        _relative(c, key, source, "the source", 'beside the profile, such as "patches/sitecustomize.py"')
        content, mode = _read(c, key, folder, source)
        import hashlib  # only where a profile carries files

        found.append(
            ProfileFile(
                path=path,
                source=folder / source,
                content=content,
                mode=mode,
                sha256=hashlib.sha256(content).hexdigest(),
            )
        )
    return tuple(found)


def _relative(c: _Checker, key: str, value: str, what: str, example: str) -> None:
    """A relative path, written plainly: no leading /, no . or .. part, no empty part, no NUL byte."""
    parts = value.split("/")
    if not value or "\0" in value or value.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise c.fail(
            key, f"{what} {value!r} must be a plain relative path that stays where it belongs, {example}"
        )


def _read(c: _Checker, key: str, folder: Path, source: str) -> tuple[bytes, int]:
    path = folder / source
    escape = confined.Confinement(folder).path(str(path))
    if escape is not None:
        raise c.fail(
            key,
            f"{escape[0]} is a link to {escape[1]}, outside the profile's folder {folder}; put the file itself there",
        )
    try:
        found = read_small(path)
    except OSError as exc:
        raise c.fail(key, f"the source {path} {unreadable(exc)}") from exc
    if found is None:
        raise c.fail(
            key,
            f"the source {path} is larger than {MAX_BYTES >> 20} MiB; carry patches and start-up files, not libraries",
        )
    return found


_NOT_A_FILE = (errno.EINVAL, errno.EISDIR)


def read_small(path: Path) -> tuple[bytes, int] | None:
    """The content and permission bits of the regular file `path` (regular.open_fd: an OSError for a pipe, a socket, a
    device or a folder, never a wait), None where it is larger than MAX_BYTES: what a profile's [files] and `accept`
    carry into a venv."""
    with os.fdopen(regular.open_fd(path), "rb") as handle:
        content = handle.read(MAX_BYTES + 1)
        mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
    return (content, mode) if len(content) <= MAX_BYTES else None


def unreadable(exc: OSError) -> str:
    """What `read_small`'s OSError says of the path, in words that follow its name."""
    if exc.errno in _NOT_A_FILE:
        return "is not a regular file (a pipe, a socket, a device or a folder)"
    return f"cannot be read ({exc.strerror or exc})"
