"""The migration day's papercuts (issue 36, item 10), each as a new user met it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tiny
from conftest import ROOT
from launch import run_provision

from provision import log


def test_the_readme_says_the_install_takes_17_s_and_the_suite_minutes() -> None:
    """ "17 s of `.ci/run`" read as the whole suite's time (it is 3-7 minutes)."""
    readme = (ROOT / "README.md").read_text()
    assert "17 s of `.ci/run`" not in readme
    paragraph = readme[readme.index("The test command installs with uv") :][:600]
    assert "install step takes 17 s" in paragraph and "3 to 7 minutes" in paragraph


def test_profiles_says_where_profiles_are_read_from(tmp_path: Path) -> None:
    """Editing profiles/ in a checkout did nothing after `pip install .`, and nothing said where profiles come from."""
    mine = tmp_path / "mine"
    mine.mkdir()
    tiny.profile(mine)
    env = {"PROVISION_PROFILES": str(mine)}
    document = json.loads(run_provision("profiles", "--json", env=env, check=True).stdout)
    assert document["folders"][0] == str(mine) and len(document["folders"]) == 2
    table = run_provision("profiles", env=env, check=True).stdout
    assert "read from PROVISION_PROFILES" in " ".join(table.split()) and "shipped with provision" in " ".join(
        table.split()
    )
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "editing `profiles/` in the checkout changes nothing" in readme and "PROVISION_PROFILES" in readme


def test_an_install_under_way_says_so_as_it_goes() -> None:
    """create's install phase was silent for 78 s while uv downloaded: a line every so often says it is working."""
    said: list[str] = []
    with log.ticking(said.append, lambda seconds: f"{seconds:.2f} s so far", every=0.05):
        time.sleep(0.4)
    assert len(said) >= 3 and all(line.endswith(" s so far") for line in said), said
    count = len(said)
    time.sleep(0.2)
    assert len(said) == count  # stopped with the block


def test_the_imports_check_shows_each_import_as_it_goes(tmp_path: Path, index_server) -> None:
    """The imports check showed one line for 65 s: each module now, as it is imported."""
    tool = tiny.tool_with_env(tmp_path, "", tiny.index(index_server))
    done = tool("check", "tiny", "--only", "imports")
    assert "... check imports: importing alpha (alpha), 1 of 1" in done.stderr, done.stderr


def test_baseline_refuses_before_it_says_run_1_of_3(tmp_path: Path, index_server) -> None:
    tool = tiny.tool_with_env(tmp_path, "", tiny.index(index_server))
    done = tool(
        "baseline",
        "tiny",
        "--runs",
        "3",
        check=False,
        env={"PROVISION_NVML_REPLAY": str(ROOT / "tests/data/no-driver.nvml.json")},
    )
    assert done.returncode == 7 and "no NVIDIA GPU" in done.stderr, done.stderr
    assert "run 1 of 3" not in done.stderr, done.stderr


def test_compare_says_the_second_does_not_exist_before_the_firsts_baseline(
    tmp_path: Path, index_server
) -> None:
    tool = tiny.tool_with_env(tmp_path, "", tiny.index(index_server))
    done = tool("compare", "tiny", "nothere", check=False)
    assert done.returncode == 7 and "nothere" in done.stderr.splitlines()[0], done.stderr
    assert "no baseline" not in done.stderr


def test_adopt_of_a_venv_provision_built_is_refused_and_one_registered_is_named(
    tmp_path: Path, index_server
) -> None:
    tool = tiny.tool_with_env(tmp_path, "", tiny.index(index_server))
    built = tiny.build_of(tool) / "venv"
    refused = tool("adopt", "again", str(built), "--no-lock", check=False)
    assert refused.returncode == 7 and "was built by provision as 'tiny'" in refused.stderr, refused.stderr
    assert "again" not in tool.envs()
    import subprocess

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    first = json.loads(tool("adopt", "first", str(venv), "--no-lock", "--json").stdout)
    assert first["notes"] == []
    second = tool("adopt", "second", str(venv), "--no-lock")
    assert "note: " in second.stdout and "is registered as 'first' too" in second.stdout, second.stdout
    document = json.loads(tool("adopt", "third", str(venv), "--no-lock", "--json").stdout)
    assert len(document["notes"]) == 2


def test_an_unknown_profile_key_says_which_it_meant(tmp_path: Path) -> None:
    profile = tmp_path / "x.toml"
    profile.write_text(
        'schema = 1\nname = "x"\ncuda = "13.0"\npython_version = "3.12"\n[packages]\nalpha = "==1.0"\n'
    )
    done = run_provision("lock", str(profile))
    assert done.returncode == 4 and "python_version: unknown key (did you mean 'python'?" in done.stderr, (
        done.stderr
    )
