"""`create` checks what it installed against the lock's RECORDs: uv installs from its cache and trusts what it
unpacked there, so a wheel edited in uv's cache (its file, or its file and its RECORD together) reached the new venv
with exit 0. The drift check of a build made this minute compares each file with the RECORD of the very wheel the lock
pins (as provision read it by the wheel's sha256 when locking), and a difference is a FAIL: nothing is activated."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
import tiny

EDITED = b"import os  # edited in uv's cache\n"


@pytest.fixture
def tool(tmp_path: Path, provision_bin: str, index_server) -> tiny.Tool:
    served = tiny.index(index_server)
    served.ranges = (
        True  # the RECORD of each locked wheel is read by range requests when locking, as on a real index
    )
    return tiny.make_tool(tmp_path, provision_bin, served)


def edit_uv_cache(cache: Path, with_record: bool) -> None:
    """alpha/__init__.py of each of uv's unpacked copies of alpha 1.0, edited; with its RECORD row made to match when
    `with_record`."""
    modules = [
        p
        for p in cache.glob("archive-v0/*/alpha/__init__.py")
        if (p.parent.parent / "alpha-1.0.dist-info").is_dir()
    ]
    assert modules, list(cache.rglob("*"))
    for module in modules:
        module.chmod(0o644)
        module.write_bytes(EDITED)
        if with_record:
            record = module.parent.parent / "alpha-1.0.dist-info" / "RECORD"
            record.chmod(0o644)
            digest = base64.urlsafe_b64encode(hashlib.sha256(EDITED).digest()).rstrip(b"=").decode()
            rows = [
                f"alpha/__init__.py,sha256={digest},{len(EDITED)}"
                if row.startswith("alpha/__init__.py,")
                else row
                for row in record.read_text().splitlines()
            ]
            record.write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize("with_record", [False, True], ids=["file", "file-and-record"])
def test_a_wheel_edited_in_uvs_cache_fails_create(
    tool: tiny.Tool, tmp_path: Path, isolated, with_record: bool
) -> None:
    own = tmp_path / "uv"  # a uv cache of this test's own: the edit must reach no other test's alpha 1.0
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "UV_CACHE_DIR": str(own)}  # and provision's RECORDs
    tool("create", "tiny", "--python", tiny.PY, env=env)
    edit_uv_cache(own, with_record)
    done = tool("create", "tiny", "--name", "again", "--python", tiny.PY, "--json", env=env, check=False)
    result = json.loads(done.stdout)
    drift = next(c for c in result["checks"] if c["id"] == "drift")
    assert done.returncode == 1 and drift["status"] == "fail", (done.returncode, drift)
    assert "alpha/__init__.py" in drift["reason"] and "not what the lock pins" in drift["reason"], drift[
        "reason"
    ]
    assert not result["activated"] and "again" not in tool.envs()


def test_a_build_as_locked_passes_its_fresh_drift_check(tool: tiny.Tool, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    done = tool("create", "tiny", "--python", tiny.PY, "--json", env=env)
    drift = next(c for c in json.loads(done.stdout)["checks"] if c["id"] == "drift")
    assert drift["status"] == "pass", drift
    # the lock's RECORDs were there to compare
    assert list((tmp_path / "xdg" / "provision" / "records").iterdir())


def test_a_sibling_wheels_record_is_never_taken_for_the_installed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release of two manylinux wheels: records/ holds the RECORD of the one an earlier lock judged (manylinux2014),
    uv installed the other (manylinux_2_28, whose RECORD was read from uv's cache: not trusted). The build's files are
    compared with the RECORD of the wheel installed, told by its WHEEL file's tags, or with none: never the sibling's
    (its binaries differ; a create of today's SGLang stack FAILed on cryptography, lxml and apache-tvm-ffi)."""
    from packaging.pylock import Package, PackageWheel, Pylock
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from provision import wheelfacts
    from provision.envs import fresh
    from provision.stacks import urls

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    old = "pkg-1.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    new = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    url = "http://127.0.0.1:1/files/"
    site = tmp_path / "venv/lib/python3.12/site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg/_native.so").write_bytes(b"the 2.28 build")
    (site / "pkg-1.0.dist-info").mkdir()
    (site / "pkg-1.0.dist-info/WHEEL").write_text(
        "Wheel-Version: 1.0\nTag: cp312-cp312-manylinux_2_28_x86_64\n"
    )
    sibling = "sha256=" + base64.urlsafe_b64encode(
        hashlib.sha256(b"the 2.17 build").digest()
    ).decode().rstrip("=")
    record = {"rows": [["pkg/_native.so", sibling]], "from": "range", "url": urls.digest(url + old)}
    wheelfacts.put("records", "a" * 64, record)  # read by range from that very URL: trusted
    lock = tmp_path / "pylock.toml"
    pylock = Pylock(
        lock_version=Version("1.0"),
        created_by="test",
        packages=[
            Package(
                name=canonicalize_name("pkg"),
                version=Version("1.0"),
                wheels=[
                    PackageWheel(url=url + old, hashes={"sha256": "a" * 64}),
                    PackageWheel(url=url + new, hashes={"sha256": "b" * 64}),
                ],
            )
        ],
    )
    import tomlkit

    lock.write_text(tomlkit.dumps(pylock.to_dict()))
    findings, known = fresh.against_lock(tmp_path / "venv", tmp_path / "build", lock)
    assert findings == [] and known == 0  # the installed wheel's RECORD is not held: nothing compared
    (site / "pkg-1.0.dist-info/WHEEL").write_text(
        "Wheel-Version: 1.0\nTag: cp312-cp312-manylinux2014_x86_64\nTag: cp312-cp312-manylinux_2_17_x86_64\n"
    )
    findings, known = fresh.against_lock(tmp_path / "venv", tmp_path / "build", lock)
    assert known == 1 and [(f.kind, f.path) for f in findings] == [("modified", "pkg/_native.so")]


def test_a_path_the_lock_knows_two_wheels_share_holds_either_ones_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flashinfer-python and torch-c-dlpack-ext both install a top-level build_backend.py; the lock records it in
    known_conflicts with each one's hash. The build holds the one installed last: not `modified` (create of today's
    SGLang stack FAILed on it); a content neither wheel has still is."""
    import tomlkit
    from packaging.pylock import Package, PackageWheel, Pylock
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from provision import wheelfacts
    from provision.envs import fresh
    from provision.stacks import urls

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    site = tmp_path / "venv/lib/python3.12/site-packages"
    site.mkdir(parents=True)

    def digest(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")

    packages, installs = [], {}
    for n, name in enumerate(("aaa", "bbb")):
        url = f"http://127.0.0.1:1/files/{name}-1.0-py3-none-any.whl"
        sha256 = str(n) * 64
        row = ["build_backend.py", digest(name.encode())]
        wheelfacts.put("records", sha256, {"rows": [row], "from": "range", "url": urls.digest(url)})
        packages.append(
            Package(
                name=canonicalize_name(name),
                version=Version("1.0"),
                wheels=[PackageWheel(url=url, hashes={"sha256": sha256})],
            )
        )
        installs[name] = row[1]
    document = Pylock(lock_version=Version("1.0"), created_by="test", packages=packages).to_dict()
    document["tool"] = {
        "provision": {"known_conflicts": [{"path": "build_backend.py", "installs": installs}]}
    }
    lock = tmp_path / "pylock.toml"
    lock.write_text(tomlkit.dumps(document))
    (site / "build_backend.py").write_bytes(b"bbb")  # the second wheel's, installed last
    findings, known = fresh.against_lock(tmp_path / "venv", tmp_path / "build", lock)
    assert known == 2 and findings == []
    (site / "build_backend.py").write_bytes(b"edited")
    findings, _ = fresh.against_lock(tmp_path / "venv", tmp_path / "build", lock)
    assert [(f.kind, f.path) for f in findings] == [("modified", "build_backend.py")]
