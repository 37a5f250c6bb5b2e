"""`provision upgrade`: the whole move as one step, with real uv, real venvs from the tests' index and a baseline that is
a real program printing a figure that depends on the environment (its profile's [env] UPGRADE_FIGURE, with a small
jitter per run): faster is activated, slower is kept, within noise is activated, failed checks and a gate FAIL keep
the old one, kill -9 after each step goes on with --resume without building twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tiny
from conftest import DATA
from test_probe import NO_CC, hung_nvml

BENCH = """\
import os, pathlib, sys
counter = pathlib.Path(sys.prefix) / "bench-runs"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
jitter = (0.0, 0.4, -0.4)[n % 3]
print(f"decode {float(os.environ['UPGRADE_FIGURE']) + jitter:.2f} tok/s")
"""
STEPS = ["gates", "lock", "lock-report", "create", "checks", "baseline", "decide"]


def baseline(bench: Path, figure: str) -> str:
    return (
        f'[env]\nUPGRADE_FIGURE = "{figure}"\n'
        f'[baseline]\ncommand = ["python", "{bench}"]\n'
        'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
    )


@pytest.fixture
def made(tmp_path: Path, index_server, provision_bin: str) -> tiny.Tool:
    """Environment `old` active (alpha 1.0, 82 tok/s), and profiles to move to: fast (90), slow (75), same (82.2)."""
    served = tiny.index(index_server)
    served.add("gamma", "1.0", files={"gamma/__init__.py": b"raise ImportError('broken on purpose')\n"})
    tool = tiny.make_tool(tmp_path, provision_bin, served)
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    for name, packages, figure in (
        ("old", 'alpha = "==1.0"', "82"),
        ("fast", 'alpha = "==2.0"', "90"),
        ("slow", 'alpha = "==2.0"', "75"),
        ("same", 'alpha = "==2.0"', "82.2"),
        ("broken", 'alpha = "==2.0"\ngamma = "==1.0"', "90"),
    ):
        tiny.profile(tool.profiles, name, packages, extra=baseline(bench, figure))
    tool.create("old")
    return tool


def upgrade(tool: tiny.Tool, *args: str, env: dict[str, str | None] | None = None) -> tuple[int, dict]:
    done = tool("upgrade", *args, "--runs", "3", "--json", check=False, env=env)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def active(tool: tiny.Tool) -> str | None:
    return next((n for n, e in tool.envs().items() if e["active"]), None)


def test_a_faster_stack_is_activated_and_recorded(made: tiny.Tool, tmp_path: Path) -> None:
    page = tmp_path / "ticket.md"
    code, said = upgrade(made, "fast", "--markdown", str(page))
    assert code == 0 and said["decision"] == "activated", said
    assert [s["step"] for s in said["steps"]] == STEPS and {s["status"] for s in said["steps"]} == {"pass"}, (
        said["steps"]
    )
    old, new = said["baseline"]["from"], said["baseline"]["to"]
    assert (old["median"], old["min"], old["max"], old["runs"]) == (82.0, 81.6, 82.4, 3)
    assert new["median"] == 90.0 and said["baseline"]["change"] == pytest.approx(8 / 82, abs=1e-6)
    assert said["baseline"]["within_noise"] is False and said["from"] == "old" and said["to"] == "fast"
    assert (
        "82.00" in said["reason"]
        and "90.00" in said["reason"]
        and said["undo"] == "provision rollback --to old"
    )
    assert active(made) == "fast"
    text = page.read_text()
    assert text.startswith("## Upgrade old -> fast: ACTIVATED") and "| decide | **PASS** |" in text, text
    # the record is kept with the new build and shown by envs and report --env
    envs = made.envs()
    assert envs["fast"]["upgrade"]["decision"] == "activated" and envs["fast"]["upgrade"]["from"] == "old"
    assert envs["old"]["upgrade"] is None
    assert (Path(envs["fast"]["path"]) / "upgrade.json").is_file() and not (
        made.home / "upgrades" / "fast.json"
    ).exists()
    report = json.loads(made("report", "--env", "fast", "--json").stdout)
    (target,) = [t for t in report["machines"][0]["targets"] if t["kind"] == "environment"]
    (gate,) = [g for g in target["gates"] if g["id"] == "upgrade"]
    assert gate["status"] == "info" and "from old" in gate["reason"] and "rollback --to old" in gate["reason"]
    # stored as baseline --runs stores them: compare reads the upgrade's series
    compared = json.loads(made("compare", "old", "fast", "--json").stdout)
    assert compared["verdict"] == "better" and [len(e["figures"]) for e in compared["environments"]] == [3, 3]
    made("rollback")
    assert active(made) == "old"


def test_a_slower_stack_is_kept_and_the_old_one_stays_active(made: tiny.Tool) -> None:
    code, said = upgrade(made, "slow")
    assert code == 1 and said["decision"] == "kept" and active(made) == "old", said
    assert said["steps"][-1] == {**said["steps"][-1], "step": "decide", "status": "fail"}
    assert "75.00" in said["reason"] and "82.00" in said["reason"] and "worse beyond noise" in said["reason"]
    assert said["undo"] is None and "slow" in made.envs()  # built, listed, never activated
    assert "slow: upgrade from old: kept" in made("envs", env={"COLUMNS": "200"}).stdout
    human = made("upgrade", "slow", "--resume", check=False)  # a finished upgrade: its record, shown again
    assert human.returncode == 1 and "kept: old stays active" in human.stdout, human.stdout
    # the same stack, allowed 10 % slower: moved to, without building it again
    code, said = upgrade(made, "--to-env", "slow", "--max-slowdown", "10")
    assert code == 0 and active(made) == "slow" and "within --max-slowdown 10%" in said["reason"], said
    # lock, lock-report (its lock), create
    assert [s["status"] for s in said["steps"]][1:4] == [
        "skip",
        "pass",
        "skip",
    ]


def test_within_noise_is_not_worse(made: tiny.Tool) -> None:
    code, said = upgrade(made, "same", "--no-activate")  # the rule says yes; --no-activate leaves old active
    assert code == 0 and said["decision"] == "kept" and said["undo"] is None and active(made) == "old", said
    assert "within noise" in said["reason"] and "--no-activate: old stays active" in said["reason"]
    code, said = upgrade(made, "--to-env", "same")
    assert code == 0 and said["decision"] == "activated" and said["baseline"]["within_noise"] is True, said
    assert "within noise" in said["reason"] and active(made) == "same"


def test_failed_checks_keep_the_build_listed_and_never_active(made: tiny.Tool) -> None:
    code, said = upgrade(made, "broken")
    assert code == 1 and said["decision"] == "kept" and active(made) == "old", said
    assert [s["step"] for s in said["steps"]] == STEPS[:5] and said["steps"][-1]["status"] == "fail"
    assert "imports FAIL" in said["reason"] and said["baseline"] is None
    assert made.envs()["broken"]["check_status"] in ("fail", "error")


def test_a_gate_fail_builds_nothing(made: tiny.Tool) -> None:
    old_driver = json.loads((DATA / "h200.nvml.json").read_text())
    answers = {"nvmlSystemGetDriverVersion": "575.57.08", "nvmlSystemGetCudaDriverVersion_v2": 12090}
    for call in old_driver["calls"]:
        call["result"] = answers.get(call["fn"], call.get("result"))
    replay = made.home.parent / "old-driver.nvml.json"
    replay.write_text(json.dumps(old_driver))
    builds, locks = made.builds(), sorted((made.home / "locks").iterdir())
    code, said = upgrade(made, "fast", env={"PROVISION_NVML_REPLAY": str(replay)})
    assert code == 1 and said["decision"] == "kept" and [s["step"] for s in said["steps"]] == ["gates"], said
    assert said["steps"][0]["status"] == "fail" and "driver:" in said["reason"] and "580" in said["reason"]
    assert (
        made.builds() == builds and sorted((made.home / "locks").iterdir()) == locks and active(made) == "old"
    )


def test_different_baselines_stop_unless_one_is_named(made: tiny.Tool, tmp_path: Path) -> None:
    tiny.profile(
        made.profiles,
        "other",
        'alpha = "==2.0"',
        extra=baseline(tmp_path / "bench.py", "90").replace("timeout = 60", "timeout = 61"),
    )
    code, said = upgrade(made, "other")
    assert code == 1 and said["steps"][0]["status"] == "fail" and "[baseline] differ" in said["reason"], said
    assert "--baseline-from" in said["reason"] and "other" not in made.envs()
    code, said = upgrade(made, "other", "--baseline-from", "old")
    assert code == 0 and said["decision"] == "activated", said


def test_to_env_moves_to_an_adopted_venv(made: tiny.Tool, tmp_path: Path) -> None:
    """A venv the team built by hand, adopted with its profile: measured against the active one, and moved to."""
    venv = tmp_path / "by-hand"
    subprocess.run(
        ["uv", "venv", str(venv), "--python", sys.executable, "--quiet"],
        check=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]},
    )
    subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "uv"),
            "pip",
            "install",
            "--quiet",
            "-p",
            str(venv),
            "--index-url",
            made.served.url,
            "alpha==2.0",
        ],
        check=True,
        timeout=120,
    )
    made("adopt", "by-hand", str(venv), "--profile", "fast", "--no-lock")
    code, said = upgrade(made, "--to-env", "by-hand")
    assert code == 0 and said["decision"] == "activated" and active(made) == "by-hand", said
    assert [s["status"] for s in said["steps"]] == ["pass", "skip", "skip", "skip", "pass", "pass", "pass"], (
        said["steps"]
    )
    assert said["baseline"]["to"]["median"] == 90.0


def records(tool: tiny.Tool, name: str) -> dict | None:
    """The upgrade's record, wherever it is kept now."""
    for path in [tool.home / "upgrades" / f"{name}.json", *tool.home.glob(f"builds/{name}-*/upgrade.json")]:
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                continue
    return None


def test_a_step_that_errs_says_how_the_upgrade_goes_on(made: tiny.Tool, index_server) -> None:
    """A step that cannot finish (the index down while locking) says what to mend and that the upgrade goes on with
    --resume: the same command without it is refused as unfinished, and once the index answers, --resume goes on."""
    index_server.down.add("tiny")
    failed = made("upgrade", "fast", "--runs", "3", check=False)
    assert failed.returncode == 5 and "Traceback" not in failed.stderr, failed.stderr
    assert "the upgrade goes on from lock with --resume added" in failed.stderr.splitlines()[-1], (
        failed.stderr
    )
    assert active(made) == "old"
    index_server.down.discard("tiny")
    again = made("upgrade", "fast", "--runs", "3", check=False)
    assert again.returncode == 7 and "--resume" in again.stderr, again.stderr
    code, said = upgrade(made, "fast", "--resume")
    assert code == 0 and said["decision"] == "activated" and active(made) == "fast", said


@pytest.mark.slow
@pytest.mark.parametrize("after", STEPS[:-1])
def test_kill_9_after_each_step_then_resume(made: tiny.Tool, after: str) -> None:
    """kill -9 as the step after `after` starts: the old one stays active, the same command without --resume says
    it is unfinished, and with --resume it goes on: one build, checks not run again, the same rule's decision."""
    process = made.popen("upgrade", "fast", "--runs", "3")
    number = STEPS.index(after) + 2
    deadline = time.time() + 120
    assert process.stderr is not None
    for line in process.stderr:
        if f"step {number} of 7" in line or time.time() > deadline:
            break
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    before = records(made, "fast")
    assert before is not None
    finished = [s["step"] for s in before["steps"] if s["status"] in ("pass", "skip")]
    assert finished[: STEPS.index(after) + 1] == STEPS[: STEPS.index(after) + 1], before["steps"]
    if before["decision"] is None:
        # killed within the decision (after the baseline), the switch may be made before the record says so
        assert active(made) == "old" or (after == "baseline" and active(made) == "fast"), active(made)
        again = made("upgrade", "fast", check=False)
        assert again.returncode == 7 and "an upgrade to fast is unfinished" in again.stderr
        assert "hint: go on with it: the same command with --resume" in again.stderr, again.stderr
    build = next(made.home.glob("builds/fast-*/upgrade.json"), None)
    checked = (
        json.loads((build.parent / "env.json").read_text()).get("checks")
        if build and "checks" in finished
        else None
    )
    code, said = upgrade(made, "fast", "--resume")
    assert code == 0 and said["decision"] == "activated" and active(made) == "fast", said
    assert [s["step"] for s in said["steps"]] == STEPS and said["baseline"]["to"]["median"] == 90.0
    assert len([b for b in made.builds() if b.startswith("fast-")]) == 1, made.builds()  # never built twice
    if build is not None:
        assert build.is_file(), "the build the killed run made was replaced"
    if checked is not None:  # proven before the kill: not checked again
        assert json.loads((build.parent / "env.json").read_text())["checks"] == checked


@pytest.mark.skipif(NO_CC, reason="no C compiler to build a hung NVML library")
def test_a_driver_that_does_not_answer_fails_the_checks_step(made: tiny.Tool, tmp_path: Path) -> None:
    """NVML's start never returns (a real library that sleeps): the machine's driver gate FAILs before anything is
    built, and so it does for a stack built already (--to-env): nothing is activated either way. (Where the driver
    stops answering after the gates, the checks step fails: its GPU checks are ERROR, tests/probe/test_nvml_failures.py.)"""
    hung = hung_nvml(tmp_path)
    code, said = upgrade(made, "fast", env=hung)
    assert code == 1 and said["decision"] == "kept" and active(made) == "old", said
    assert said["steps"][-1]["step"] == "gates" and said["steps"][-1]["status"] == "fail"
    assert "does not answer" in said["reason"] and "fast" not in made.envs(), said["reason"]
    made.create("fast", "--no-activate")
    code, said = upgrade(made, "--to-env", "fast", env=hung)
    assert code == 1 and said["decision"] == "kept" and active(made) == "old", said
    assert said["steps"][-1]["step"] == "gates" and said["steps"][-1]["status"] == "fail"
    assert "does not answer" in said["reason"], said["reason"]


def test_a_mirror_that_needs_a_password_is_judged_before_installing(made: tiny.Tool) -> None:
    """The lock-report step fetches the lock's wheels (their URLs carry no credentials) with those the mirror's
    PROVISION_INDEX_<NAME> variable gives for that host, as uv sends them: it was HTTP 401 and the upgrade stopped."""
    made.served.password = "s3cret"
    mirror = made.served.url.replace("http://", "http://alice:s3cret@")
    code, said = upgrade(
        made, "fast", env={"PROVISION_INDEX_DEFAULT": mirror, "UV_CACHE_DIR": str(made.home.parent / "cold")}
    )
    assert code == 0 and said["steps"][2]["step"] == "lock-report" and said["steps"][2]["status"] == "pass", (
        said
    )
    assert "s3cret" not in json.dumps(said)
