"""A hostile index on 127.0.0.1 against `profiles new` and `report --lock`: a server trickling a byte at a time (body
or headers), an endless answer, oversized metadata and pages of the wrong shape. Each is one line naming the URL,
soon after the deadline (PROVISION_HTTP_TIMEOUT=1 here), with nothing spooled past its bound; never a hang, never a
traceback. Each run is bounded by its own timeout, so a regression fails here rather than hanging the suite."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT
from hostile_http import JSON_TYPE, HostileServer, Route
from launch import run_provision
from locks import sealed
from wheelhouse import build_wheel

SGLANG = "sglang-0.5.23-py3-none-any.whl"
WHEEL_PATH = f"/files/{SGLANG}"
PAGE_PATH = "/simple/sglang/"
DEADLINE = "1"
pytestmark = pytest.mark.timeout(120)


def sglang_wheel(tmp_path: Path, requires: tuple[str, ...] = ("torch==2.14.1",)) -> bytes:
    return build_wheel(tmp_path / "built", "sglang", "0.5.23", requires=requires).read_bytes()


def page(**extra: object) -> Route:
    entry = {"filename": SGLANG, "url": WHEEL_PATH, "hashes": {}, **extra}
    return Route(json.dumps({"meta": {"api-version": "1.1"}, "files": [entry]}).encode(), JSON_TYPE)


def profiles_new(
    provision_bin: str, hostile: HostileServer, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    return run_provision(
        "profiles",
        "new",
        "mine",
        "--from",
        "sglang==0.5.23",
        "--index",
        f"default={hostile.url}/simple",
        "-o",
        str(tmp_path / "mine.toml"),
        timeout=60,
        env={**os.environ, "PROVISION_HTTP_TIMEOUT": DEADLINE, "TMPDIR": str(spool_dir(tmp_path))},
    )


def spool_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir(exist_ok=True)
    return folder


def one_line_naming(done: subprocess.CompletedProcess[str], url: str, code: int = 5) -> None:
    assert done.returncode == code, done.stderr
    # progress lines aside
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("... ")]
    assert (
        len(lines) == 2
        and lines[0].startswith("error: ")
        and url in lines[0]
        and lines[1].startswith("hint: ")
    ), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "attack", ["page-trickle", "page-trickle-headers", "metadata-trickle", "wheel-trickle", "range-trickle"]
)
def test_a_server_trickling_a_byte_at_a_time_fails_at_the_deadline(
    provision_bin: str, hostile: HostileServer, tmp_path: Path, attack: str
) -> None:
    wheel = sglang_wheel(tmp_path)
    target = {
        "page": PAGE_PATH,
        "metadata": WHEEL_PATH + ".metadata",
        "wheel": WHEEL_PATH,
        "range": WHEEL_PATH,
    }[attack.split("-")[0]]
    hostile.routes[PAGE_PATH] = page(**({"core-metadata": True} if attack.startswith("metadata") else {}))
    hostile.routes[WHEEL_PATH] = Route(
        wheel, headers={"Accept-Ranges": "bytes"} if attack.startswith("range") else {}
    )
    hostile.routes[WHEEL_PATH + ".metadata"] = Route(
        b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n"
    )
    route = hostile.routes[target]
    hostile.routes[target] = Route(
        route.body,
        route.content_type,
        "trickle-headers" if attack.endswith("headers") else "trickle",
        headers=route.headers,
    )
    done = profiles_new(provision_bin, hostile, tmp_path)
    one_line_naming(done, f"127.0.0.1:{hostile.port}{target}")
    # a 1 s deadline (the server gives up by itself after LIFETIME, 45 s); the client's start-up does not count
    assert "within" in done.stderr and hostile.lasted(target) < 10, (hostile.lasted(target), done.stderr)
    assert not (tmp_path / "mine.toml").exists()


def test_an_endless_wheel_stops_at_the_size_the_index_gives(
    provision_bin: str, hostile: HostileServer, tmp_path: Path
) -> None:
    wheel = sglang_wheel(tmp_path)
    hostile.routes[PAGE_PATH] = page(size=len(wheel))
    hostile.routes[WHEEL_PATH] = Route(wheel, how="endless")
    done = profiles_new(provision_bin, hostile, tmp_path)
    one_line_naming(done, f"127.0.0.1:{hostile.port}{WHEEL_PATH}")
    assert "larger than" in done.stderr
    assert hostile.sent[WHEEL_PATH] < 64 << 20  # stopped near the bound, not at the server's own 256 MiB
    assert not any(spool_dir(tmp_path).iterdir())


def test_an_endless_page_and_huge_metadata_stop_at_their_bounds(
    provision_bin: str, hostile: HostileServer, tmp_path: Path
) -> None:
    hostile.routes[PAGE_PATH] = Route(b"", JSON_TYPE, how="endless")
    done = profiles_new(provision_bin, hostile, tmp_path)
    one_line_naming(done, f"127.0.0.1:{hostile.port}{PAGE_PATH}")
    assert "larger than" in done.stderr and hostile.sent[PAGE_PATH] < 128 << 20
    hostile.routes[PAGE_PATH] = page(**{"core-metadata": True})
    hostile.routes[WHEEL_PATH + ".metadata"] = Route(b"Name: sglang\n" + b"X: " + b"y" * (17 << 20) + b"\n")
    done = profiles_new(provision_bin, hostile, tmp_path)
    one_line_naming(done, f"127.0.0.1:{hostile.port}{WHEEL_PATH}.metadata")
    assert "larger than" in done.stderr


def metadata_member_of(size: int) -> bytes:
    """A wheel whose METADATA inflates to `size` bytes (a few KiB compressed)."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("sglang-0.5.23.dist-info/METADATA", "w", force_zip64=True) as member,
    ):
        member.write(
            b"Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\nRequires-Dist: torch==2.14.1\n\n"
        )
        block = bytes(1 << 20)
        for _ in range(size >> 20):
            member.write(block)
    return buffer.getvalue()


HOSTILE_DATA = {
    "requires-unclosed": ("wheel", ("torch (==2.9.0",)),
    "requires-empty-version": ("wheel", ("torch==;;",)),
    "requires-nul": ("wheel", ("torch\0==2.9.0",)),
    "marker-unterminated": ("wheel", ("torch==2.9.0; python_version == '3.12",)),
    "marker-not-a-version": ("wheel", ("torch==2.9.0; python_version ~= 'x'",)),
    "page-a-list": ("page", b"[]"),
    "page-files-a-number": ("page", b'{"files": 5}'),
    "page-file-empty": ("page", b'{"files": [{}]}'),
    "page-filename-a-number": ("page", b'{"files": [{"filename": 5, "url": "x"}]}'),
    "page-nested-deep": ("page", b"[" * 100000 + b"]" * 100000),
    "page-not-json": ("page", b"{"),
    "wheel-not-a-zip": ("raw", b"not a zip at all"),
    "wheel-no-metadata": ("zip", b""),
    "wheel-metadata-bomb": ("bomb", b""),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_DATA))
def test_hostile_index_data_is_one_line_naming_the_url(
    provision_bin: str, hostile: HostileServer, tmp_path: Path, case: str
) -> None:
    kind, data = HOSTILE_DATA[case]
    hostile.routes[PAGE_PATH] = page()
    if kind == "wheel":
        assert isinstance(data, tuple)
        hostile.routes[WHEEL_PATH] = Route(sglang_wheel(tmp_path, data))
    elif kind == "page":
        assert isinstance(data, bytes)
        hostile.routes[PAGE_PATH] = Route(data, JSON_TYPE)
    elif kind == "raw":
        assert isinstance(data, bytes)
        hostile.routes[WHEEL_PATH] = Route(data)
    elif kind == "zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("sglang/__init__.py", b"")
        hostile.routes[WHEEL_PATH] = Route(buffer.getvalue())
    else:
        hostile.routes[WHEEL_PATH] = Route(metadata_member_of(64 << 20))
    done = profiles_new(provision_bin, hostile, tmp_path)
    one_line_naming(done, f"127.0.0.1:{hostile.port}{PAGE_PATH if kind == 'page' else WHEEL_PATH}")
    assert not (tmp_path / "mine.toml").exists()


def test_torch_files_that_are_not_wheel_names_are_passed_over(
    provision_bin: str, hostile: HostileServer, tmp_path: Path
) -> None:
    hostile.routes[PAGE_PATH] = page()
    hostile.routes[WHEEL_PATH] = Route(sglang_wheel(tmp_path))
    files = [
        {"filename": name, "url": f"/files/{name}", "hashes": {}}
        for name in ("torchmanylinux.whl", "torch-2.14.1-manylinux.whl", "torch-2.14.1-x-y-manylinux-z.whl")
    ]
    hostile.routes["/simple/torch/"] = Route(json.dumps({"files": files}).encode(), JSON_TYPE)
    done = profiles_new(provision_bin, hostile, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "torch" in (tmp_path / "mine.toml").read_text()


def lock_of(tmp_path: Path, url: str, wheel: bytes, size: int | None) -> Path:
    entry: dict[str, object] = {
        "name": "alpha-1.0-py3-none-any.whl",
        "url": url,
        "hashes": {"sha256": hashlib.sha256(wheel).hexdigest()},
    }
    if size is not None:
        entry["size"] = size
    doc = {
        "lock-version": "1.0",
        "created-by": "tests",
        "requires-python": ">=3.10",
        "packages": [{"name": "alpha", "version": "1.0", "wheels": [entry]}],
    }
    path = tmp_path / "pylock.toml"
    path.write_text(sealed(doc))
    return path


@pytest.mark.parametrize("how", ["trickle", "trickle-headers", "endless"])
def test_report_lock_fetches_within_the_deadline_and_the_locks_size(
    provision_bin: str, hostile: HostileServer, tmp_path: Path, how: str
) -> None:
    wheel = build_wheel(tmp_path / "built", "alpha", "1.0").read_bytes()
    path = "/files/alpha-1.0-py3-none-any.whl"
    hostile.routes[path] = Route(wheel, how=how)
    lock = lock_of(tmp_path, hostile.url + path, wheel, len(wheel))
    done = run_provision(
        "report",
        "--lock",
        str(lock),
        "--machine",
        str(ROOT / "docs/machines/h200.probe.json"),
        timeout=60,
        env={
            **os.environ,
            "PROVISION_HTTP_TIMEOUT": DEADLINE,
            "UV_CACHE_DIR": str(tmp_path / "cache"),
            "TMPDIR": str(spool_dir(tmp_path)),
            "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        },
    )
    one_line_naming(done, f"127.0.0.1:{hostile.port}{path}")
    assert hostile.lasted(path) < 10  # a 1 s deadline, not the server's 45 s LIFETIME
    assert ("larger than" if how == "endless" else "within") in done.stderr
    assert hostile.sent.get(path, 0) < 64 << 20
    assert not any(spool_dir(tmp_path).iterdir())
    # nothing partial kept in the wheel cache
    assert not [p for p in (tmp_path / "xdg").rglob("*") if p.is_file()]


def test_a_redirect_loop_is_the_index_failing(
    provision_bin: str, hostile: HostileServer, tmp_path: Path
) -> None:
    wheel = build_wheel(tmp_path / "built", "alpha", "1.0").read_bytes()
    path = "/files/alpha-1.0-py3-none-any.whl"
    hostile.routes[path] = Route(status=302, headers={"Location": path})
    done = run_provision(
        "report",
        "--lock",
        lock_of(tmp_path, hostile.url + path, wheel, None),
        "--machine",
        ROOT / "docs/machines/h200.probe.json",
        timeout=60,
        # the loop, not a deadline, ends it: a 1 s deadline for the whole request (thirty redirects)
        # ran out first on a loaded machine, and the error then said "within", not "redirects"
        env={"PROVISION_HTTP_TIMEOUT": "30", "XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )
    one_line_naming(done, f"127.0.0.1:{hostile.port}{path}")
    assert "redirects" in done.stderr
