"""A real full disk, made on demand: a small tmpfs mounted in a user and mount namespace of its own (`unshare -rm`),
held by a sleeping process for one test. provision runs inside that namespace (`nsenter`), where the folder is the
small disk; the test fills it, frees it, remounts it read-only and reads what provision left through
/proc/PID/root, without entering; a disk made with few inodes (`inodes=N`) has them all taken just as well.
Nothing is injected: the kernel says ENOSPC or EROFS where the write really fails (a write(), which names no file,
rather than the open() a fake raises from).

What the folder held before is carried onto the small disk (a home made by the tests' fast `tool.create`), so that
only the commands under attack pay for starting inside the namespace. conftest's `small_disk` fixture gives one,
and skips the test where `unshare -rm` is not permitted (a container without user namespaces)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import tiny
from launch import argv, environment
from wheelhouse import IndexServer

FILLER = ".filler"  # the file that takes the disk's room
INODES = ".inodes"  # the folder of empty files that take its inodes


def unavailable(scratch: Path) -> str | None:
    """Why a small disk cannot be made here (no unshare or nsenter, user namespaces not permitted), None when it can."""
    for tool in ("unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(scratch)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -rm failed: {exc}"
    return f"unshare -rm is not permitted here: {done.stderr.strip()}" if done.returncode else None


class Disk:
    """A tmpfs of `size` over the folder `mount`, in a namespace held by a sleeping process: what the folder held is
    copied onto it first."""

    def __init__(self, mount: Path, size: str = "16m", inodes: int | None = None) -> None:
        mount.mkdir(parents=True, exist_ok=True)
        # the folder's own content, bound here while it is copied
        under = mount.with_name(f".{mount.name}.under")
        under.mkdir(exist_ok=True)
        script = (
            'mount --bind "$1" "$2" && mount -t tmpfs -o "$3" tmpfs "$1" && cp -a "$2/." "$1/" && '
            'umount "$2" && echo ready && exec sleep 3600'
        )
        options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
        self.mount = mount
        self.holder = subprocess.Popen(
            ["unshare", "-rm", "sh", "-c", script, "sh", str(mount), str(under), options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline() != "ready\n":
            self.holder.kill()
            raise AssertionError(f"the small disk was not made: {self.holder.communicate()[1]}")

    def view(self, path: Path) -> Path:
        """`path` (under the mount) as the small disk holds it, read from outside the namespace."""
        return Path(f"/proc/{self.holder.pid}/root") / path.absolute().relative_to("/")

    def run(
        self, *args: str | Path, env: Mapping[str, str | None] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`provision ARGS...` inside the namespace, in the test's isolated environment plus `env`."""
        return self.inside(*argv(args), env=env, timeout=timeout)

    def inside(
        self, *command: str, env: Mapping[str, str | None] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        enter = ["nsenter", "-t", str(self.holder.pid), "-U", "-m", "--preserve-credentials", "--"]
        return subprocess.run(
            [*enter, *command], capture_output=True, text=True, env=environment(env), timeout=timeout
        )

    def free(self) -> int:
        status = os.statvfs(self.view(self.mount))
        return status.f_bavail * status.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take all of the disk's room but `leave` bytes (rounded to its pages)."""
        with open(self.view(self.mount / FILLER), "ab") as filler:
            want = self.free() - leave
            while want > 0:
                try:
                    want -= filler.write(b"\0" * min(want, 1 << 20))
                except OSError:
                    break

    def unfill(self) -> None:
        self.view(self.mount / FILLER).unlink(missing_ok=True)
        shutil.rmtree(self.view(self.mount / INODES), ignore_errors=True)

    def inodes_free(self) -> int:
        return os.statvfs(self.view(self.mount)).f_favail

    def fill_inodes(self, leave: int = 0) -> None:
        """Take every inode of the disk but `leave` (a disk made with `inodes`): no file, folder or link can be made,
        however much room there is."""
        folder = self.view(self.mount / INODES)
        folder.mkdir(exist_ok=True)
        made = [folder / str(n) for n in range(self.inodes_free())]
        for path in made:
            try:
                path.touch()
            except OSError:
                break
        for path in made[:leave]:
            path.unlink()

    def read_only(self, on: bool = True) -> None:
        done = self.inside("mount", "-o", f"remount,{'ro' if on else 'rw'}", str(self.mount))
        assert done.returncode == 0, done.stderr

    def close(self) -> None:
        self.holder.kill()
        self.holder.communicate()


def tree(folder: Path) -> set[str]:
    """Every path under `folder` (a venv's own files left out), relative: what a failed command must not add to."""
    found = set()
    for path in folder.rglob("*"):
        relative = str(path.relative_to(folder))
        if "/venv/" not in relative:
            found.add(relative)
    return found


def with_big(tool: tiny.Tool) -> tiny.Tool:
    """`tool` with profile `big`: one wheel of 1 MiB that does not compress, what fills a small disk as uv installs
    it (its index the tool's own)."""
    assert tool.served is not None and tool.profiles is not None
    tool.served.add("big", "1.0", files={"big/__init__.py": b"", "big/blob.bin": os.urandom(1 << 20)})
    tiny.profile(tool.profiles, "big", 'big = "==1.0"')
    return tool


def tool_on(tmp_path: Path, binary: str, server: IndexServer) -> tiny.Tool:
    """tiny.make_tool's Tool (profile tiny on its own index), its home in tmp_path/disk: the folder a small disk is
    made over."""
    made = tiny.make_tool(tmp_path, binary, tiny.index(server))
    return tiny.Tool(binary, tmp_path / "disk" / "home", made.profiles, made.served)
