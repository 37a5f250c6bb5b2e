"""Profile mistakes the profile check catches (exit 4, naming the file and the key) before uv ever runs: an index URL
with a space or a bad port, an index name uv would misread, a package name that is not one (a space, a marker, a URL),
bad extras, a baseline timeout that is not a positive number, a file too large to be a profile. And `profiles`, finding
a folder, a link loop or a pipe named *.toml: each named in a note, the rest listed, exit 4."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from launch import run_provision

BASE = 'schema = 1\nname = "p"\ncuda = "13.0"\n'
CASES = {
    "index-space": (
        BASE + '[indexes]\nmirror = "https://mirror.example/my index/simple"\n[packages]\nalpha = "==1.0"\n',
        "indexes.mirror",
    ),
    "index-port": (
        BASE + '[indexes]\nmirror = "https://mirror.example:99999/simple"\n[packages]\nalpha = "==1.0"\n',
        "indexes.mirror",
    ),
    "index-port-word": (
        BASE + '[indexes]\nmirror = "https://mirror.example:http/simple"\n[packages]\nalpha = "==1.0"\n',
        "indexes.mirror",
    ),
    "index-no-host": (
        BASE + '[indexes]\nmirror = "https:///simple"\n[packages]\nalpha = "==1.0"\n',
        "indexes.mirror",
    ),
    "index-name-equals": (
        BASE + '[indexes]\n"a=b" = "https://mirror.example/simple"\n[packages]\nalpha = { index = "a=b" }\n',
        "indexes.a=b",
    ),
    "index-name-space": (
        BASE + '[indexes]\n"a b" = "https://mirror.example/simple"\n[packages]\nalpha = "==1.0"\n',
        "indexes.a b",
    ),
    "package-space": (BASE + '[packages]\n"my package" = "==1.0"\n', "packages.my package"),
    "package-marker": (
        BASE + '[packages]\n"alpha; python_version<\'3\'" = "==1.0"\n',
        "packages.alpha; python_version<'3'",
    ),
    "package-url": (
        BASE + '[packages]\n"alpha @ https://example.com/a.whl" = ""\n',
        "packages.alpha @ https://example.com/a.whl",
    ),
    "package-dash": (BASE + '[packages]\n"-r" = ""\n', "packages.-r"),
    "package-version-in-name": (BASE + '[packages]\n"alpha==1.0" = ""\n', "packages.alpha==1.0"),
    "extras-bad": (
        BASE + '[packages]\nalpha = { version = "==1.0", extras = ["a b"] }\n',
        "packages.alpha.extras",
    ),
    "extras-bracket": (
        BASE + '[packages]\nalpha = { version = "==1.0", extras = ["x]"] }\n',
        "packages.alpha.extras",
    ),
    "timeout-negative": (
        BASE + '[packages]\nalpha = "==1.0"\n[baseline]\ncommand = ["true"]\npattern = "(x)"\ntimeout = -5\n',
        "baseline.timeout",
    ),
    "timeout-zero": (
        BASE + '[packages]\nalpha = "==1.0"\n[baseline]\ncommand = ["true"]\npattern = "(x)"\ntimeout = 0\n',
        "baseline.timeout",
    ),
    "timeout-inf": (
        BASE
        + '[packages]\nalpha = "==1.0"\n[baseline]\ncommand = ["true"]\npattern = "(x)"\ntimeout = inf\n',
        "baseline.timeout",
    ),
}


def provision(provision_bin: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PROVISION_HOME": str(tmp_path / "home"),
        "PROVISION_PROFILES": str(tmp_path / "profiles"),
        "PROVISION_INDEX_DEFAULT": "http://127.0.0.1:9/simple",
        "PROVISION_HTTP_TIMEOUT": "2",
    }
    return run_provision(*args, timeout=120, env=env)


@pytest.mark.parametrize("case", CASES)
def test_a_profile_mistake_is_the_profile_checks_exit_4_naming_the_key(
    provision_bin: str, tmp_path: Path, case: str
) -> None:
    text, key = CASES[case]
    (tmp_path / "profiles").mkdir()
    path = tmp_path / "profiles" / "p.toml"
    path.write_text(text)
    for command in (("lock", "p", "-o", str(tmp_path / "out.toml")), ("profiles",)):
        done = provision(provision_bin, tmp_path, *command)
        assert done.returncode == 4 and "Traceback" not in done.stderr, (command, done.stderr)
        # a random temporary name may hold "uv"
        said = done.stderr.split("hint:")[0].replace(str(tmp_path), "TMP")
        # provision's error, not uv's
        assert f"error: {path}: {key}:" in done.stderr and "uv" not in said, done.stderr
    assert not (tmp_path / "out.toml").exists()


def test_a_60_mb_profile_is_refused_by_its_size_before_it_is_parsed(
    provision_bin: str, tmp_path: Path
) -> None:
    (tmp_path / "profiles").mkdir()
    path = tmp_path / "profiles" / "p.toml"
    with open(path, "w") as handle:
        handle.write(BASE + '[packages]\nalpha = "==1.0"\ndescription = "')
        handle.write("x" * (60 << 20))
        handle.write('"\n')
    done = provision(provision_bin, tmp_path, "lock", "p", "-o", str(tmp_path / "out.toml"))
    assert done.returncode == 4 and f"error: {path}: larger than 1 MiB" in done.stderr, done.stderr


@pytest.mark.parametrize("kind", ["folder", "link-loop", "fifo"])
def test_profiles_names_what_is_no_profile_file_lists_the_rest_and_exits_4(
    provision_bin: str, tmp_path: Path, kind: str
) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "good.toml").write_text(BASE.replace('"p"', '"good"') + '[packages]\nalpha = "==1.0"\n')
    odd = folder / "odd.toml"
    if kind == "folder":
        odd.mkdir()
    elif kind == "link-loop":
        odd.symlink_to(odd)
    else:
        os.mkfifo(odd)
    done = provision(provision_bin, tmp_path, "profiles", "--json")
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    assert f"{odd}: not a regular file" in done.stderr or f"{odd}: cannot read it" in done.stderr, done.stderr
    document = json.loads(done.stdout)
    assert "good" in [p["name"] for p in document["profiles"]] and document["skipped"][0]["path"] == str(odd)
    assert provision(provision_bin, tmp_path, "profiles").returncode == 4
