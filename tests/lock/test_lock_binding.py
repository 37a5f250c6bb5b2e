"""A lock is bound to its profile: refused without its [tool.provision] binding, from another profile, or when a
profile package is missing or at a version the pin refuses; a package declared without an index comes from the
default one only; wheel tags are judged by packaging.tags; a bad -o, a non-UTF-8 lock, a corrupted cached lock and a
killed lock's folder are handled. Credentials never reach a message or uv's command line."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import tiny
import tomlkit
from locks import sealed

from provision.stacks import lock, lockfile

SECRET = "S3cr3t"


@pytest.fixture
def tool(tmp_path: Path, provision_bin: str, index_server) -> tiny.Tool:
    return tiny.make_tool(
        tmp_path,
        provision_bin,
        tiny.index(index_server),
        ("tiny2", 'alpha = "==1.0"'),
        ("both", 'alpha = "==1.0"\nbeta = ">=1.0"'),
    )


def made_lock(tool: tiny.Tool, tmp_path: Path, profile: str = "both") -> Path:
    path = tmp_path / f"pylock.{profile}.toml"
    tool("lock", profile, "-o", str(path))
    return path


def refused(tool: tiny.Tool, profile: str, path: Path, words: str, *extra: str) -> None:
    done = tool.create(profile, "--lock", str(path), "--no-checks", *extra, check=False)
    assert done.returncode == 7 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not tool.builds()


def test_a_lock_without_its_binding_is_refused(tool: tiny.Tool, tmp_path: Path) -> None:
    path = made_lock(tool, tmp_path)
    text = path.read_text()
    path.write_text(re.sub(r"(?m)^profile_hash = .*\n", "", text))
    refused(tool, "both", path, "carries no [tool.provision] binding")
    path.write_text(text.split("[tool.provision]")[0])
    # its seal went with it
    refused(tool, "both", path, "carries no [tool.provision] binding", "--allow-unsealed")


def test_a_lock_is_checked_against_the_profile_not_only_its_hash(tool: tiny.Tool, tmp_path: Path) -> None:
    path = made_lock(tool, tmp_path)
    text = path.read_text()
    tiny.profile(tool.profiles, "loose", 'alpha = ">=1.0"')
    # alpha 2.0, whole and valid
    newer = tomlkit.parse(made_lock(tool, tmp_path, "loose").read_text())["packages"][0]
    document = tomlkit.parse(text)
    packages = document["packages"]
    beta = next(i for i, p in enumerate(packages) if p["name"] == "beta")
    del packages[beta]
    path.write_text(sealed(document))
    refused(tool, "both", path, "has no beta, which profile both asks for")
    document = tomlkit.parse(text)
    alpha = next(i for i, p in enumerate(document["packages"]) if p["name"] == "alpha")
    document["packages"][alpha] = newer
    path.write_text(sealed(document))
    refused(tool, "both", path, "has alpha 2.0, which the profile's '==1.0' does not allow")
    path.write_text(text)
    tool.create("both", "--lock", str(path), "--no-checks")


def test_a_lock_from_another_profile_says_so(tool: tiny.Tool, tmp_path: Path) -> None:
    refused(tool, "tiny2", made_lock(tool, tmp_path, "tiny"), "was locked from profile 'tiny', not 'tiny2'")


def test_a_package_declared_without_an_index_comes_from_the_default_one(
    tool: tiny.Tool, tmp_path: Path, index_server
) -> None:
    other = index_server.index("other")
    other.add("beta", "9.0")  # first in the order of indexes, and higher: it must not win
    other.add("alpha", "1.0")
    tiny.profile(
        tool.profiles,
        "mixed",
        'alpha = { index = "other", version = "==1.0" }\nbeta = {}',
        f'[indexes]\nother = "{other.url}"\n',
    )
    path = tmp_path / "pylock.mixed.toml"
    locked = json.loads(tool("lock", "mixed", "-o", str(path), "--json").stdout)["packages"]
    versions = {p["name"]: (p["version"], p["index"], p["url"].split("/")[3]) for p in locked}
    assert versions == {"alpha": ("1.0", "other", "other"), "beta": ("1.0", "default", "tiny")}


def test_an_index_variable_no_index_of_the_profile_has_is_named_not_silently_dropped(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    """--index NAME=URL for a name the profile lacks is refused; the same as PROVISION_INDEX_<NAME> (how the Ansible
    role passes mirrors, out of `ps`) is said, by its name only: a typo'd mirror must not go unnoticed, nor its URL."""
    secret_url = f"https://user:{SECRET}@mirror.example/whl/cu130"
    done = tool(
        "lock",
        "tiny2",
        "-o",
        str(tmp_path / "pylock.tiny2.toml"),
        env={"PROVISION_INDEX_PYTROCH": secret_url, "PROVISION_INDEX_DEFAULT_": ""},
    )
    lines = [line for line in done.stderr.splitlines() if "PROVISION_INDEX_" in line]
    assert lines == [
        "note: PROVISION_INDEX_PYTROCH is set, but profile tiny2 has no index of that name (its indexes: "
        "default): not used"
    ], done.stderr
    assert SECRET not in done.stderr + done.stdout and "mirror.example" not in done.stderr
    quiet = tool(
        "lock",
        "tiny2",
        "-q",
        "-o",
        str(tmp_path / "pylock.tiny2.toml"),
        env={"PROVISION_INDEX_PYTROCH": secret_url},
    )
    assert "PROVISION_INDEX_PYTROCH" not in quiet.stderr  # -q: a note for people


@pytest.mark.parametrize(
    ("filename", "accepted"),
    [
        ("x-1-cp312-cp312-manylinux_2_28_x86_64.whl", True),
        ("x-1-cp312-cp312-manylinux2014_x86_64.whl", True),
        ("x-1-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
        ("x-1-py3-none-any.whl", True),
        ("x-1-cp312-cp312-macosx_11_0_x86_64.whl", False),
        ("x-1-cp312-cp312-musllinux_1_2_x86_64.whl", False),
        ("x-1-cp312-cp312-manylinux_2_34_x86_64.whl", False),
        ("x-1-cp312-cp312-manylinux_2_28_aarch64.whl", False),
        ("x-1-cp313-cp313-manylinux_2_28_x86_64.whl", False),
        ("x-1-cp312-cp312-win_amd64.whl", False),
    ],
)
def test_wheel_tags_are_judged_by_packaging_tags(filename: str, accepted: bool) -> None:
    target = lock.Target(python="3.12", platform="x86_64-manylinux_2_28")
    assert lock._compatible(filename, lock.target_tags(target)) is accepted


def test_a_non_utf8_lock_and_a_bad_output_are_one_line(tool: tiny.Tool, tmp_path: Path) -> None:
    bad = tmp_path / "pylock.bad.toml"
    bad.write_bytes(b'lock-version = "1.0"\n# \xff\xfe\n')
    done = tool.create("tiny", "--lock", str(bad), check=False)
    assert (
        done.returncode == 2
        and done.stderr.startswith(f"error: {bad}: not a readable PEP 751 lock")
        and "Traceback" not in done.stderr
    )
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    locked_up = tmp_path / "locked-up"
    locked_up.mkdir(mode=0o500)
    if os.geteuid() == 0:  # root writes anywhere it may; /proc takes no new folder from anyone
        locked_up = Path("/proc/provision-test")
    for output in (a_file / "pylock.toml", locked_up / "pylock.toml"):
        requests = len(tool.served.requests)
        done = tool("lock", "tiny", "-o", str(output), check=False)
        assert (
            done.returncode == 2
            and done.stderr.startswith("error: cannot write the lock to")
            and "Traceback" not in done.stderr
        )
        assert len(tool.served.requests) == requests  # refused before anything was resolved


def test_a_killed_lock_leaves_no_work_folder_behind(tool: tiny.Tool, tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    tool.served.delay = 0.5
    slow = tool.popen(
        "lock",
        "tiny",
        "-o",
        str(tmp_path / "pylock.slow.toml"),
        env={"TMPDIR": str(temp), "UV_CACHE_DIR": str(tmp_path / "c")},
    )
    deadline = time.time() + 30
    while time.time() < deadline and not list(temp.glob("provision-lock-*")) and slow.poll() is None:
        time.sleep(0.05)
    slow.send_signal(signal.SIGKILL)
    slow.wait()
    assert list(temp.glob("provision-lock-*")), "the lock was killed before it made its folder"
    tool.served.delay = 0
    tool("lock", "tiny", "-o", str(tmp_path / "pylock.fast.toml"), env={"TMPDIR": str(temp)})
    assert not list(temp.glob("provision-lock-*"))


def test_a_corrupted_cached_lock_is_made_again_and_gc_clears_it(tool: tiny.Tool) -> None:
    tool.create("tiny", "--no-checks")
    (cached,) = (tool.home / "locks").glob("pylock.tiny-*.toml")
    cached.write_text("lock-version = \n")
    tool.create("tiny", "--name", "again", "--no-checks")
    assert cached.read_text() != "lock-version = \n"
    cached.write_bytes(b"\xff\xfe")
    assert f"locks/{cached.name} (unreadable)" in json.loads(tool("gc", "--json").stdout)["removed"]
    assert not cached.exists()


def test_credentials_are_never_echoed_nor_on_uvs_command_line(
    tool: tiny.Tool, tmp_path: Path, index_server
) -> None:
    done = tool("create", "tiny", "--index", f"main:http://alice:{SECRET}@127.0.0.1/simple", check=False)
    assert done.returncode == 2 and SECRET not in done.stderr and "****" in done.stderr
    tiny.profile(
        tool.profiles,
        "ftp",
        'alpha = { index = "main" }',
        f'[indexes]\nmain = "ftp://alice:{SECRET}@example.org/simple"\n',
    )
    done = tool("lock", "ftp", check=False)
    assert done.returncode == 4 and SECRET not in done.stderr and "****" in done.stderr
    guarded = index_server.index("guarded")
    guarded.password = SECRET
    guarded.add("alpha", "1.0")
    guarded.delay = 0.2  # long enough to read uv's command line while it runs
    url = guarded.url.replace("http://", f"http://alice:{SECRET}@")
    creating = tool.popen("create", "tiny", "--python", tiny.PY, "--no-checks", "--index", f"default={url}")
    seen: list[bytes] = []
    while creating.poll() is None:
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b" pip " in cmdline.replace(b"\0", b" "):
                seen.append(cmdline)
        time.sleep(0.02)
    out, err = creating.communicate()
    assert creating.returncode == 0, err
    assert seen and not [c for c in seen if SECRET.encode() in c]
    assert any(b"compile" in c for c in seen) and any(b"sync" in c for c in seen)
    assert SECRET not in out + err and all(
        SECRET not in p.read_text() for p in (tool.home / "locks").glob("*.toml")
    )


def test_a_package_declared_without_an_index_stays_on_uvs_own_default(
    tool: tiny.Tool, tmp_path: Path, index_server
) -> None:
    """provision does not know uv's default index here (UV_DEFAULT_INDEX is set behind its back, as the public
    registry is uv's default): the named index that also serves beta must still not win."""
    other = index_server.index("other2")
    other.add("beta", "9.0")
    other.add("gamma", "1.0")  # a dependency only the named index has: it stays there
    other.add("alpha", "1.0", requires=("gamma",))
    tiny.profile(
        tool.profiles,
        "unnamed",
        'alpha = { index = "other", version = "==1.0" }\nbeta = {}',
        f'[indexes]\nother = "{other.url}"\n',
    )
    path = tmp_path / "pylock.unnamed.toml"
    env = {"PROVISION_INDEX_DEFAULT": "", "UV_DEFAULT_INDEX": tool.served.url}
    locked = json.loads(tool("lock", "unnamed", "-o", str(path), "--json", env=env).stdout)["packages"]
    versions = {p["name"]: (p["version"], p["index"], p["url"].split("/")[3]) for p in locked}
    assert versions == {
        "alpha": ("1.0", "other", "other2"),
        "gamma": ("1.0", "other", "other2"),
        "beta": ("1.0", "default", "tiny"),
    }


def test_a_home_whose_path_holds_a_newline_gets_a_cached_lock_create_can_read(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    """The cached lock's first line (a TOML comment) holds the rebuild command with `-o` in the home: a raw newline
    there ended the comment, and uv refused the lock (exit 6). The command stays one line and means the same to bash."""
    import subprocess

    tool.home = tmp_path / "ho\nme"
    tool.create("tiny", "--no-checks")
    (cached,) = (tool.home / "locks").glob("pylock.tiny-*.toml")
    first = cached.read_text().split("\n", 1)[0]
    rebuild = first.split("Rebuild: ", 1)[1]
    words = subprocess.run(
        ["bash", "-c", f'printf "%s\\0" {rebuild}'], capture_output=True, text=True, check=True
    ).stdout
    assert words.split("\0")[-2] == str(cached), words
    assert lockfile.read(cached)[1].profile == "tiny"
