"""SGLang from source, as teams that patch it work: a profile package from a source tree (`path`, editable) or a git
repository (`git`, `rev`), uv's own sources. The lock records each (PEP 751 `directory`, `vcs` at its commit); drift
says an editable distribution is not hashed (its tree is the user's) and judges a git one by its commit. Real uv,
real git, real builds (an in-tree PEP 517 backend, so no registry is needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import tiny
from conftest import ROOT

from provision.errors import ProfileError
from provision.stacks import profiles

BACKEND = (ROOT / "tests/fakes/intree_backend.py").read_bytes()


def source_tree(folder: Path, name: str, version: str, body: str) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(body)
    (folder / "intree_backend.py").write_bytes(BACKEND)
    (folder / "NAME").write_text(f"{name} {version}\n")
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "{version}"\n[build-system]\nrequires = []\n'
        'build-backend = "intree_backend"\nbackend-path = ["."]\n'
    )
    return folder


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_path_and_git_sources_are_locked_and_judged_by_drift(
    index_server, tmp_path: Path, provision_bin: str
) -> None:
    served = tiny.index(index_server)
    profiles_dir = tmp_path / "profiles"
    source_tree(profiles_dir / "src" / "patched", "patched", "0.5.23", "PATCHED = True\n")
    repo = source_tree(tmp_path / "repo", "fromgit", "1.0", "REV = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD")
    tiny.profile(
        profiles_dir,
        "src",
        'alpha = "==1.0"\npatched = { path = "src/patched", editable = true }\n'
        f'fromgit = {{ git = "file://{repo}", rev = "main" }}',
    )
    tool = tiny.Tool(provision_bin, tmp_path / "home", profiles_dir, served)
    locked = json.loads(tool("lock", "src", "-o", str(tmp_path / "pylock.src.toml"), "--json").stdout)
    by_name = {p["name"]: p for p in locked["packages"]}
    assert by_name["patched"]["hash_source"] == "editable" and by_name["patched"]["url"] == str(
        profiles_dir / "src/patched"
    )
    assert (
        by_name["fromgit"]["hash_source"] == "git" and by_name["fromgit"]["url"] == f"file://{repo}@{first}"
    )
    text = (tmp_path / "pylock.src.toml").read_text()
    assert "editable = true" in text and f'commit-id = "{first}"' in text
    tool.create("src", "--lock", str(tmp_path / "pylock.src.toml"))
    venv = Path(tool.envs()["src"]["venv"])
    imported = subprocess.run(
        [venv / "bin/python", "-c", "import patched, fromgit; print(patched.__file__, fromgit.REV)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(profiles_dir / "src/patched/patched/__init__.py") in imported and imported.strip().endswith(
        "1"
    )
    drift = json.loads(tool("check", "src", "--only", "drift", "--json").stdout)["checks"][0]
    assert drift["status"] == "pass", drift
    assert (
        f"patched is editable from {profiles_dir / 'src/patched'}: its source tree is the user's, not hashed"
        in drift["reason"]
    )
    assert f"fromgit from git file://{repo} at commit {first[:12]}, as locked" in drift["reason"]
    # the user's edit to the editable tree is theirs: still no finding; another commit of the git one is
    (profiles_dir / "src/patched/patched/__init__.py").write_text("PATCHED = 2\n")
    (repo / "fromgit/__init__.py").write_text("REV = 2\n")
    git(repo, "commit", "-qam", "two")
    second = git(repo, "rev-parse", "HEAD")
    from provision.stacks import uvtool

    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "--no-deps",
            "--quiet",
            f"fromgit @ git+file://{repo}@{second}",
        ]
    )
    drift = json.loads(tool("check", "src", "--only", "drift", "--json", check=False).stdout)["checks"][0]
    assert drift["status"] == "warn"
    assert (
        "other-source" in drift["reason"]
        and f"git file://{repo}@{first} -> git file://{repo}@{second}" in drift["reason"]
    ), drift


def test_a_source_is_one_of_path_and_git_and_never_with_an_index(tmp_path: Path) -> None:
    cases = {
        'x = { path = "a", git = "https://h/x.git" }': "give one of path and git",
        'x = { path = "a", index = "default" }': "remove index",
        "x = { editable = true }": "editable needs path",
        'x = { rev = "v1" }': "rev needs git",
        'x = { git = "ftp://h/x" }': "expected a git URL",
    }
    for spec, words in cases.items():
        path = tmp_path / "p.toml"
        path.write_text(f'schema = 1\nname = "p"\ncuda = "13.0"\n[packages]\n{spec}\n')
        with pytest.raises(ProfileError) as caught:
            profiles.load_file(path)
        assert words in caught.value.message and "packages.x" in caught.value.message, (
            spec,
            caught.value.message,
        )


def test_a_wheel_file_that_names_its_tags_otherwise_is_no_other_source(tmp_path: Path) -> None:
    """Two wheels of the SGLang stack whose WHEEL file names their tags otherwise than their file name: a compressed
    tag set in one Tag line (openai-harmony 0.0.4), and `linux_x86_64` kept after a rename to manylinux (torchvision
    0.29.2). Drift read both as another source; they are the lock's own files. A wheel of another platform still is."""
    from provision.envs import drift

    def installed(name: str, tag: str) -> drift.Installed:
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n")
        return drift.Installed(name=name, version="1.0", info=info)

    harmony = installed("openai_harmony", "cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64")
    assert drift._other_source(harmony, ["openai_harmony-0.0.4-cp38-abi3-manylinux_2_17_x86_64.whl"]) is None
    vision = installed("torchvision", "py3-none-linux_x86_64")
    assert drift._other_source(vision, ["torchvision-0.29.2-py3-none-manylinux_2_28_x86_64.whl"]) is None
    other = installed("other", "py3-none-linux_aarch64")
    assert drift._other_source(other, ["other-1.0-py3-none-manylinux_2_28_x86_64.whl"]) is not None
