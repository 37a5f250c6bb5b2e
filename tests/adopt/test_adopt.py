"""`provision adopt` locks what a venv it did not build holds: each distribution matched to the wheel it came from by
name, version, tags and RECORD hashes, on the tests' own index or in uv's cache; drift and restore then use that lock.
Real venvs built by uv (not by provision), a real index on 127.0.0.1, the installed provision as a process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from launch import run_provision
from wheelhouse import build_wheel

from provision.envs import drift
from provision.stacks import uvtool

PY = sys.executable


class Setup:
    def __init__(self, tmp_path: Path, binary: str) -> None:
        self.tmp, self.binary = tmp_path, binary
        self.venv = tmp_path / "srv" / "venv"
        self.cache = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}

    def build(self, url: str, *requirements: str) -> Path:
        """The venv, made and filled by uv itself from the index at `url` (uv's default link mode: hard links)."""
        uvtool.run(["venv", str(self.venv), "--python", PY, "--quiet"], env=self.cache)
        uvtool.run(
            [
                "pip",
                "install",
                "--python",
                str(self.venv / "bin" / "python"),
                "--quiet",
                "--default-index",
                url,
                *requirements,
            ],
            env=self.cache,
        )
        return drift.site_packages(self.venv)

    def __call__(
        self, *args: str, index: str = "", code: int | None = 0, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        variables = {
            "PROVISION_HOME": str(self.tmp / "home"),
            "PROVISION_INDEX_DEFAULT": index,
            "PROVISION_HTTP_TIMEOUT": "5",
            "UV_LINK_MODE": None,
            **self.cache,
            **extra,
        }
        done = run_provision(*args, env=variables)
        if code is not None:
            assert done.returncode == code, (
                f"provision {' '.join(args)} exited {done.returncode}: {done.stderr}"
            )
        return done

    def json(self, *args: str, **kwargs: object) -> dict:
        return json.loads(self(*args, "--json", **kwargs).stdout)  # type: ignore[arg-type]


def test_a_venv_built_by_uv_is_adopted_locked_patched_and_restored_offline_from_uvs_cache(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("main")
    served.add("alpha", "1.0")
    served.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n", "beta/data.txt": b"hello\n"})
    local = build_wheel(tmp_path / "wheels", "gamma", "0.1")  # installed from a file: no index has it
    setup = Setup(tmp_path, provision_bin)
    site = setup.build(served.url, "alpha==1.0", "beta==2.0", str(local))

    adopted = setup.json("adopt", "old", str(setup.venv), index=served.url)
    assert [(m["name"], m["version"], m["index"]) for m in adopted["matched"]] == [
        ("alpha", "1.0", "default"),
        ("beta", "2.0", "default"),
    ]
    assert {m["record_from"] for m in adopted["matched"]} == {"uv-cache"}, "uv's cache held those very wheels"
    (gamma,) = adopted["unmatched"]
    assert (
        gamma["name"] == "gamma"
        and "direct_url.json" in gamma["reason"]
        and str(local.name) in gamma["reason"]
    )
    lock = Path(adopted["lock"])
    assert lock.parent == Path(adopted["path"]) and lock.name == "pylock.adopted.toml"
    assert json.loads((Path(adopted["path"]) / "env.json").read_text())["lock"] == str(lock)
    text = setup("adopt", "twice", str(setup.venv), index=served.url).stdout
    assert "2 of 3 distributions matched" in text and "gamma 0.1: installed from" in text

    (result,) = setup.json("check", "old", "--only", "drift")["checks"]
    assert result["status"] == "pass" and "and the lock" in result["reason"]

    data = site / "beta" / "data.txt"
    patched = data.with_suffix(".new")
    patched.write_text("patched\n")
    os.replace(patched, data)  # as an editor saves: uv's cached copy (hard-linked) stays as it was
    (site / "sitecustomize.py").write_text("import sys\n")
    (site / "gamma" / "__init__.py").write_text("patched = True\n")
    setup("check", "old", "--only", "drift", "--strict", code=1)

    index_server.down.add("main")  # from here no index answers: uv's cache must do
    # gamma cannot be put back: exits as restore will
    plan = setup.json("restore", "old", "--dry-run", code=1)
    assert (
        plan["reinstall"] == ["beta"]
        and plan["not_restorable"] == ["gamma"]
        and plan["set_aside"] == ["sitecustomize.py"]
    )
    done = setup.json("restore", "old", "--no-checks", code=1)
    assert (
        done["reinstall"] == ["beta"] and done["downloaded"] is False and done["not_restorable"] == ["gamma"]
    )
    assert data.read_text() == "hello\n" and not (site / "sitecustomize.py").exists()
    (result,) = setup.json("check", "old", "--only", "drift")["checks"]
    assert [(f["kind"], f["distribution"]) for f in result["details"]["findings"]] == [("modified", "gamma")]


def test_a_small_wheel_alone_of_its_tags_is_downloaded_without_range_reads_first(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """Where the page gives sizes (PEP 700, as the default registry's does) and a wheel is the only one its installed
    tags allow, a range read could spare its download only where it is another build; in the common case it is two
    or three requests before the same download. So a small one is downloaded at once (proven the same way: a rebuilt
    one is still another build), and a large one is still told apart by ranges first."""
    first = index_server.index("first")
    first.add("alpha", "1.0")
    first.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    first.add("large", "3.0", files={"large/blob.bin": os.urandom((4 << 20) + 4096)})
    setup = Setup(tmp_path, provision_bin)
    setup.build(first.url, "alpha==1.0", "beta==2.0", "large==3.0")
    rebuilt = index_server.index("sized")
    rebuilt.ranges = rebuilt.sizes = True
    rebuilt.add("alpha", "1.0")
    rebuilt.add("beta", "2.0", files={"beta/__init__.py": b"X = 2\n"})
    (rebuilt.root / "large").mkdir()
    (wheel,) = (first.root / "large").glob("*.whl")
    (rebuilt.root / "large" / wheel.name).write_bytes(wheel.read_bytes())

    adopted = setup.json(
        "adopt", "old", str(setup.venv), index=rebuilt.url, UV_CACHE_DIR=str(tmp_path / "empty-cache")
    )
    assert [(m["name"], m["record_from"]) for m in adopted["matched"]] == [
        ("alpha", "download"),
        ("large", "download"),
    ], adopted
    (beta,) = adopted["unmatched"]
    assert "another build (beta/__init__.py differs)" in beta["reason"], beta
    assert set(rebuilt.ranged) == {wheel.name}, rebuilt.ranged  # the large one only


def test_a_wheel_rebuilt_with_other_contents_under_the_same_version_is_not_matched(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    first = index_server.index("first")
    first.add("alpha", "1.0")
    first.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    setup = Setup(tmp_path, provision_bin)
    site = setup.build(first.url, "alpha==1.0", "beta==2.0")
    # the same names and versions, built again; beta with other contents
    rebuilt = index_server.index("rebuilt")
    rebuilt.ranges = True
    rebuilt.add("alpha", "1.0")
    rebuilt.add("beta", "2.0", files={"beta/__init__.py": b"X = 2\n"})
    # nothing cached: the RECORDs come from the index
    empty_cache = {"UV_CACHE_DIR": str(tmp_path / "empty-cache")}

    adopted = setup.json("adopt", "old", str(setup.venv), index=rebuilt.url, **empty_cache)
    assert [(m["name"], m["record_from"]) for m in adopted["matched"]] == [("alpha", "download")], (
        "the same files rebuilt into another zip are the same build"
    )
    (beta,) = adopted["unmatched"]
    assert beta["name"] == "beta" and "another build (beta/__init__.py differs)" in beta["reason"]
    assert rebuilt.range_requests > 0
    # adopted again: alpha's RECORD is read from records/ by the wheel's sha256, the index asked for pages only
    before = rebuilt.range_requests
    again = setup.json("adopt", "again", str(setup.venv), index=rebuilt.url, **empty_cache)
    assert [(m["name"], m["record_from"]) for m in again["matched"]] == [("alpha", "cache")]
    assert again["records"] == {"cache": 1} and rebuilt.range_requests == before
    assert [u["name"] for u in again["unmatched"]] == ["beta"]
    plan = setup.json("restore", "old", "--dry-run")
    assert plan["not_restorable"] == [] and plan["drift_before"]["status"] == "pass"
    (site / "beta" / "__init__.py").write_text("X = 3\n")  # an experiment on the one that matched no wheel
    (result,) = setup.json("check", "old", "--only", "drift")["checks"]
    assert result["status"] == "warn" and "provision restore cannot put back beta" in result["reason"], (
        "the hint promised a restore that restore then refuses"
    )
    (site / "alpha" / "__init__.py").write_text("Y = 1\n")
    (result,) = setup.json("check", "old", "--only", "drift")["checks"]
    assert (
        "cannot put back beta (" in result["reason"]
        and "alpha" not in result["reason"].split("cannot put back")[1]
    )


def test_adopt_with_no_index_reachable_says_so_and_lock_env_locks_it_later(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("main")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    index_server.down.add("main")
    elsewhere = {"UV_CACHE_DIR": str(tmp_path / "empty-cache")}

    adopted = setup.json("adopt", "old", str(setup.venv), index=served.url, **elsewhere)
    assert adopted["matched"] == [] and "default" in adopted["unreachable"]
    (alpha,) = adopted["unmatched"]
    assert "index default unreachable" in alpha["reason"] and "HTTP 503" in adopted["unreachable"]["default"]
    assert "uv's cache has no wheel of this build" in alpha["reason"]
    # the cache the venv was built with
    cached = setup.json("adopt", "cached", str(setup.venv), index=served.url)
    (match,) = cached["matched"]
    assert (match["name"], match["record_from"], match["index"]) == ("alpha", "uv-cache", "default")
    wheel = served.root / "alpha" / "alpha-1.0-py3-none-any.whl"
    assert (
        match["url"].endswith("/" + wheel.name)
        and match["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    )
    skipped = setup.json("adopt", "new", str(setup.venv), "--no-lock", index=served.url)
    assert skipped["lock"] is None and "matched" not in skipped

    index_server.down.clear()
    locked = setup.json("lock", "--env", "new", index=served.url, **elsewhere)
    assert [m["name"] for m in locked["matched"]] == ["alpha"] and locked["unmatched"] == []
    assert setup.json("restore", "new", "--dry-run")["drift_before"]["lock"] == locked["lock"]
    again = setup("lock", "--env", "old", index=served.url)
    assert "1 of 1 distributions matched" in again.stdout


def test_a_lock_whose_unmatched_list_is_not_a_list_is_read_as_listing_none(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    import tomlkit

    served = index_server.index("main")
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    lock = Path(setup.json("adopt", "old", str(setup.venv), index=served.url)["lock"])
    document = tomlkit.parse(lock.read_text())
    document["tool"]["provision"]["unmatched"] = 5  # type: ignore[index]
    lock.write_text(tomlkit.dumps(document))
    (result,) = setup.json("check", "old", "--only", "drift")["checks"]
    assert result["status"] == "pass"
    assert setup.json("restore", "old", "--dry-run")["not_restorable"] == []


def test_lock_env_refuses_a_built_environment_and_restore_a_lock_written_for_another(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    import tiny

    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    done = tool("lock", "--env", "tiny", check=False)
    assert done.returncode == 7 and "built by provision from its own lock" in done.stderr

    served = tool.served
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    first = setup.json("adopt", "first", str(setup.venv), index=served.url)
    second = setup.json("adopt", "second", str(setup.venv), index=served.url)
    Path(second["lock"]).write_text(Path(first["lock"]).read_text())  # first's lock, in second's place
    refused = setup("restore", "second", "--dry-run", code=7)
    assert "was written for 'first'" in refused.stderr and "provision lock --env second" in refused.stderr


def test_one_garbled_page_leaves_that_distribution_unmatched_and_the_index_reachable(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("main")
    # more than the lookup's threads: the garbled page is read after some
    good = [f"good-{n:02d}" for n in range(17)]
    for name in [*good, "zz-garbled"]:
        served.add(name, "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, *good, "zz-garbled")
    served.garbled.add("zz-garbled")
    adopted = setup.json(
        "adopt", "old", str(setup.venv), index=served.url, UV_CACHE_DIR=str(tmp_path / "empty-cache")
    )
    assert len(adopted["matched"]) == 17 and adopted["unreachable"] == {}
    (garbled,) = adopted["unmatched"]
    assert garbled["name"] == "zz-garbled" and "not a PEP 691 project page" in garbled["reason"]


def test_an_index_password_never_reaches_the_lock_nor_the_output(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    served = index_server.index("private", userinfo="alice:s3cret-word@")
    served.password = "s3cret-word"
    served.add("alpha", "1.0")
    setup = Setup(tmp_path, provision_bin)
    setup.build(served.url, "alpha==1.0")
    done = setup("adopt", "old", str(setup.venv), "--json", index=served.url)
    document = json.loads(done.stdout)
    assert [m["name"] for m in document["matched"]] == ["alpha"]
    assert "s3cret" not in done.stdout + done.stderr and "s3cret" not in Path(document["lock"]).read_text()
