"""A git URL's credentials spelled as URL parsers other than provision's read them (adversary of issue 39, round
three): `http:/user:PASSWORD@host/...` and `http:///user:PASSWORD@host/...` are `http://user:PASSWORD@host/...` to uv
(a WHATWG URL parser ignores missing or extra slashes after a special scheme), so a password there must be taken out as
in `http://`, or the URL refused, never handed to uv (and git's command line, and the lock) whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tiny
from test_git_credentials import ENCODED, USER_ENCODED, argv_watch, private_repo  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.mark.parametrize("slashes", ["/", "///"])
def test_a_password_behind_one_or_three_slashes_reaches_neither_argv_nor_the_lock(
    private_repo,  # noqa: F811 (the fixture)
    index_server,
    tmp_path: Path,
    provision_bin: str,
    slashes: str,
) -> None:
    server, _commit = private_repo
    spelled = f"{server.url}/repo.git".replace("http://", f"http:{slashes}{USER_ENCODED}:{ENCODED}@")
    profiles_dir = tmp_path / "profiles"
    profiles_dir.mkdir()
    tiny.profile(profiles_dir, "src", f'alpha = "==1.0"\nfromgit = {{ git = "{spelled}", rev = "main" }}')
    tool = tiny.Tool(provision_bin, tmp_path / "home", profiles_dir, tiny.index(index_server))
    output = tmp_path / "pylock.src.toml"
    with argv_watch("zq9Kx7") as seen:
        done = tool("lock", "src", "-o", str(output), "--json", check=False)
    assert not seen, seen
    assert "zq9Kx7" not in done.stdout + done.stderr
    assert not output.exists() or "zq9Kx7" not in output.read_text()


@pytest.mark.parametrize(
    "url",
    [
        "https://user:S3CRET@host/org/repo@1.2.3",  # read as user `user`, password `S3CRET@host/org/repo`, host 1.2.3 (an IP)
        "https://user:S3C/RET@host/repo.git",  # a raw / in the password: where the host begins is a guess
        "http://user:S3CRET@host\\@evil/repo.git",  # a \ is a / to uv: the host is `host`; provision's guess was `evil`
        "HTTPS:///user:S3CRET@host/repo.git",
    ],
)
def test_a_git_url_whose_host_is_a_guess_is_refused_without_its_password(tmp_path: Path, url: str) -> None:
    from provision.errors import ProfileError
    from provision.stacks import profiles

    path = tmp_path / "p.toml"
    path.write_text(
        f'schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\nx = {{ git = "{url.replace(chr(92), chr(92) * 2)}" }}\n'
    )
    with pytest.raises(ProfileError) as caught:
        profiles.load_file(path)
    assert "S3C" not in caught.value.message, caught.value.message
