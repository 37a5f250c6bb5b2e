"""A `{git = URL}` source behind basic auth (issue 39, item 1): the URL's user name and password never reach a
process's command line (readable by every local user in /proc/PID/cmdline), the lock, `-o`, `lock --json` or the
home's cached lock. git gets them by its own means (a credential helper fed from the environment of that child only);
the lock records the URL without them, and `create` from that lock fetches with them again. A real git server on
127.0.0.1 (git http-backend behind basic auth) and every process's argv read from /proc while the command runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import tiny
from git_http import GitServer
from test_sources import git, source_tree

from provision.errors import ProfileError
from provision.stacks import profiles

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PASSWORD = "Pa55/zq9Kx7@x"  # a / and an @: percent-encoded in the URL, as a user writes them
ENCODED = "Pa55%2Fzq9Kx7%40x"
USER = "deploy@team"
USER_ENCODED = "deploy%40team"


@contextmanager
def argv_watch(*secrets: str) -> Iterator[list[str]]:
    """Every command line seen in /proc while the block runs that holds one of `secrets` (as given, or its bytes)."""
    seen: list[str] = []
    done = threading.Event()
    wanted = [s.encode() for s in secrets]

    def watch() -> None:
        while not done.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        line = f.read()
                except OSError:
                    continue
                if any(w in line for w in wanted):
                    seen.append(line.replace(b"\0", b" ").decode(errors="replace"))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


@pytest.fixture
def private_repo(tmp_path: Path) -> Iterator[tuple[GitServer, str]]:
    work = source_tree(tmp_path / "work", "fromgit", "1.0", "REV = 1\n")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "one")
    (tmp_path / "served").mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(tmp_path / "served/repo.git")], check=True)
    server = GitServer(tmp_path / "served", USER, PASSWORD)
    yield server, git(work, "rev-parse", "HEAD")
    server.close()


def test_git_credentials_reach_neither_argv_nor_any_lock(
    private_repo, index_server, tmp_path: Path, provision_bin: str
) -> None:
    server, commit = private_repo
    bare = f"{server.url}/repo.git"
    with_credentials = bare.replace("http://", f"http://{USER_ENCODED}:{ENCODED}@")
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    tiny.profile(
        profiles_dir, "src", f'alpha = "==1.0"\nfromgit = {{ git = "{with_credentials}", rev = "main" }}'
    )
    tool = tiny.Tool(provision_bin, tmp_path / "home", profiles_dir, tiny.index(index_server))
    output = tmp_path / "pylock.src.toml"
    # a credential helper of the user's own that stores what it is given: it must never see the password
    stored = tmp_path / "git-credentials"
    (tmp_path / "gitconfig").write_text(f"[credential]\n\thelper = store --file={stored}\n")
    env = {"GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    with argv_watch(PASSWORD, ENCODED, "zq9Kx7") as seen:
        locked = tool("lock", "src", "-o", str(output), "--json", env=env)
        tool("create", "src", "--python", tiny.PY, "--no-checks", env=env)
        fetched = server.authorized
        # the lock alone (no credentials in it) installs again, with them from the profile, from an empty uv cache
        tool(
            "create",
            "src",
            "--python",
            tiny.PY,
            "--no-checks",
            "--replace",
            "--lock",
            str(output),
            env={**env, "UV_CACHE_DIR": str(tmp_path / "cold-cache")},
        )
    assert not seen, seen
    assert fetched > 0 and server.authorized > fetched  # git did fetch, with the credentials, each time
    assert not stored.exists()
    (package,) = [p for p in json.loads(locked.stdout)["packages"] if p["name"] == "fromgit"]
    assert package["url"] == f"{bare}@{commit}"
    written = [output, *(tool.home / "locks").iterdir()]
    for text in [locked.stdout, *(p.read_text() for p in written)]:
        assert "zq9Kx7" not in text and "deploy" not in text, text
    assert f'url = "{bare}"' in output.read_text()
    # a lock that holds them (an older provision's, sealed again) is refused before uv could put them on a command line
    from provision import toml
    from provision.stacks import lockfile

    raw = toml.loads(output.read_text())
    for package in raw["packages"]:
        if "vcs" in package:
            package["vcs"]["url"] = with_credentials
    raw["tool"]["provision"]["packages_sha256"] = lockfile.packages_digest(raw["packages"])
    import tomlkit

    old = tmp_path / "pylock.old.toml"
    old.write_text(tomlkit.dumps(raw))
    with argv_watch(PASSWORD, ENCODED, "zq9Kx7") as seen:
        refused = tool(
            "create", "src", "--python", tiny.PY, "--no-checks", "--replace", "--lock", str(old), check=False
        )
    assert refused.returncode == 2 and "holds a user name or password" in refused.stderr and not seen, (
        refused.stderr
    )
    assert "zq9Kx7" not in refused.stderr + refused.stdout
    venv = Path(tool.envs()["src"]["venv"])
    assert (
        subprocess.run(
            [venv / "bin/python", "-c", "import fromgit; print(fromgit.REV)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        == "1"
    )


def test_a_git_url_with_a_query_or_an_ssh_password_is_refused(tmp_path: Path) -> None:
    """A query is sent as it is on git's command line and in the lock: a token there cannot be kept off them."""
    cases = {
        'x = { git = "https://h/x.git?token=T0KEN" }': "query",
        'x = { git = "ssh://git:hunter2@h/x.git" }': "password",
    }
    for spec, words in cases.items():
        path = tmp_path / "p.toml"
        path.write_text(f'schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\n{spec}\n')
        with pytest.raises(ProfileError) as caught:
            profiles.load_file(path)
        assert words in caught.value.message and "T0KEN" not in caught.value.message, (
            spec,
            caught.value.message,
        )
        assert "hunter2" not in caught.value.message
