"""`provision try`: a real venv and a real baseline program whose figure the trial's variables, arguments and files
change; the verdict against the baseline, the files put back byte for byte, the baseline back within its noise (else
exit 1), a trial killed with -9 put back by the next command on the environment, and the ledger."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import tiny

# The baseline: about 100 tok/s with a fixed jitter of +-0.5 (a counter beside it picks the next); TRY_FACTOR scales
# it; alpha.FACTOR (a --file over alpha/__init__.py) too; TRY_STICKY leaves a factor behind for every later run (a
# machine that no longer returns to its noise); --boom fails with a traceback; TRY_SLEEP waits (a trial to kill); an
# argument --cuda-graph-max-bs* scales it by TRY_GRAPHS (the profile's [env] says by how much on each environment).
PROGRAM = """
import os, pathlib, sys, time
import alpha
state = pathlib.Path(os.environ["TRY_STATE"])
count = state / "count"
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
if "--boom" in sys.argv:
    table = {}
    table[12]
if os.environ.get("TRY_STICKY"):
    (state / "sticky").write_text(os.environ["TRY_STICKY"])
sticky = float((state / "sticky").read_text()) if (state / "sticky").exists() else 1.0
time.sleep(float(os.environ.get("TRY_SLEEP", "0")))
jitter = [0.0, 0.5, -0.5, 0.3, -0.3][n % 5]
figure = (100 + jitter) * float(os.environ.get("TRY_FACTOR", "1")) * getattr(alpha, "FACTOR", 1.0) * sticky
if any(a.startswith("--cuda-graph-max-bs") for a in sys.argv):
    figure *= float(os.environ.get("TRY_GRAPHS", "1"))
print(f"decode {figure:.3f} tok/s")
"""


def tool_with_baseline(
    tmp_path: Path,
    index_server,
    provision_bin: str,
    name: str = "tiny",
    *,
    packages: str = 'alpha = "==1.0"',
    env: dict[str, str] | None = None,
) -> tuple[tiny.Tool, Path]:
    """A Tool whose environment `name` has the baseline above (its state folder returned), created with its checks;
    `env` goes into the profile's [env]."""
    state = tmp_path / f"state-{name}"
    state.mkdir()
    served = index_server.indexes.get("tiny") or tiny.index(index_server)
    tool = (
        tiny.make_tool(tmp_path, provision_bin, served)
        if not (tmp_path / "profiles").exists()
        else tiny.Tool(provision_bin, tmp_path / "home", tmp_path / "profiles", served)
    )
    env_line = "[env]\n" + "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in {"TRY_STATE": str(state), **(env or {})}.items()
    )
    tiny.profile(
        tool.profiles,
        name,
        packages=packages,
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(PROGRAM)}]\n'
            'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 120\n'
            + env_line
        ),
    )
    tool.create(name)
    return tool, state


def tried(tool: tiny.Tool, *args: str, code: int = 0) -> dict:
    done = tool("try", *args, "--runs", "3", "--json", check=False)
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout)


def site_of(tool: tiny.Tool, name: str = "tiny") -> Path:
    venv = Path(tool.envs()[name]["path"]) / "venv"
    return next(venv.glob("lib/python3*/site-packages"))


@pytest.mark.slow
def test_better_worse_within_noise_and_failed(tmp_path: Path, index_server, provision_bin: str) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    better = tried(tool, "tiny", "faster", "--env", "TRY_FACTOR=1.2", "--note", "the first lever")
    # no baseline yet: ran first
    assert better["baseline"]["ran_first"] is True and better["baseline"]["runs"] == 3
    assert better["verdict"] == "better" and 19 < better["change_pct"] < 21 and better["restored"] is True
    assert better["figure"]["runs"] == 3 and 119 < better["figure"]["median"] < 121
    assert better["change"] == {"env": {"TRY_FACTOR": "1.2"}, "args": [], "files": []}
    assert better["baseline_after"]["within_noise"] is True and better["note"] == "the first lever"

    worse = tried(tool, "tiny", "slower", "--env", "TRY_FACTOR=0.8")
    assert (
        worse["baseline"]["ran_first"] is False
        and worse["verdict"] == "worse"
        and -21 < worse["change_pct"] < -19
    )
    noise = tried(tool, "tiny", "same", "--env", "TRY_FACTOR=1.001")
    assert noise["verdict"] == "within-noise"

    failed = tried(tool, "tiny", "boom", "--arg=--boom")
    assert failed["verdict"] == "failed" and failed["reason"] == "exit code 1: KeyError: 12", failed["reason"]
    assert failed["change"]["args"] == ["--boom"] and failed["figure"]["runs"] == 0
    assert failed["baseline_after"]["within_noise"] is True

    human = tool("try", "tiny", "faster again", "--env", "TRY_FACTOR=1.2", "--runs", "3")
    said = " ".join(human.stdout.split())
    assert "tiny: faster again (TRY_FACTOR=1.2): BETTER, +19.6%, beyond the noise of both" in said, said
    assert "99.50 - 100.50" in said and "tiny put back; its baseline is back within its noise" in said
    assert "run 3 of 3" in human.stderr  # progress for each run on stderr

    ledger = json.loads(tool("trials", "tiny", "--json").stdout)
    assert [t["label"] for t in ledger["trials"]] == ["faster", "slower", "same", "boom", "faster again"]
    assert all(t["at"] for t in ledger["trials"]) and ledger["trials"][3]["verdict"] == "failed"
    page = tool("trials", "--markdown").stdout
    assert "| faster | TRY_FACTOR=1.2 | tiny |" in page and "**FAILED**" in page


@pytest.mark.slow
def test_a_patched_file_is_put_back_byte_for_byte(tmp_path: Path, index_server, provision_bin: str) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    original = (site_of(tool) / "alpha" / "__init__.py").read_bytes()
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 0.5\n")
    result = tried(tool, "tiny", "patched", "--file", f"alpha/__init__.py={patched}")
    assert result["verdict"] == "worse" and -51 < result["change_pct"] < -49 and result["restored"] is True
    (file,) = result["change"]["files"]
    assert file["path"] == "alpha/__init__.py" and file["source"] == str(patched)
    assert (site_of(tool) / "alpha" / "__init__.py").read_bytes() == original
    drift = json.loads(tool("check", "tiny", "--only", "drift", "--json").stdout)
    assert drift["status"] == "pass"
    # never known-good
    assert "accepted" not in json.loads((Path(tool.envs()["tiny"]["path"]) / "env.json").read_text())

    # a file that was not there goes again
    new = tried(tool, "tiny", "new file", "--file", f"alpha/extra.py={patched}")
    assert new["restored"] is True and not (site_of(tool) / "alpha" / "extra.py").exists()


@pytest.mark.slow
def test_a_baseline_that_no_longer_returns_to_its_noise_exits_1(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    result = tried(tool, "tiny", "sticky", "--env", "TRY_STICKY=0.7", code=1)
    assert result["verdict"] == "worse" and result["restored"] is True
    assert result["baseline_after"]["within_noise"] is False and 69 < result["baseline_after"]["median"] < 71
    loud = tool("try", "tiny", "sticky again", "--env", "TRY_FACTOR=1", "--runs", "3", check=False)
    assert loud.returncode == 1 and "did NOT return to its noise band" in loud.stdout


@pytest.mark.slow
def test_kill_9_mid_trial_then_any_command_puts_the_file_back(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    tool("baseline", "tiny", "--runs", "3")
    target = site_of(tool) / "alpha" / "__init__.py"
    original = target.read_bytes()
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 0.5\n")
    build = Path(tool.envs()["tiny"]["path"]).resolve()
    running = tool.popen(
        "try",
        "tiny",
        "killed",
        "--file",
        f"alpha/__init__.py={patched}",
        "--env",
        "TRY_SLEEP=30",
        "--runs",
        "3",
    )
    deadline = time.time() + 60
    while time.time() < deadline and target.read_bytes() == original:
        time.sleep(0.1)
    assert target.read_bytes() == patched.read_bytes() and (build / ".trial-made").exists()
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=30)
    assert target.read_bytes() == patched.read_bytes()  # left behind

    again = tool("run", "tiny", "--", "python", "-c", "import alpha; print(getattr(alpha, 'FACTOR', 1.0))")
    assert again.stdout.strip() == "1.0" and "put back 1 file(s) a trial left" in again.stderr
    assert target.read_bytes() == original and not (build / ".trial-made").exists()
    assert json.loads(tool("trials", "tiny", "--json").stdout)["trials"] == []  # a killed trial is no row


def held_trial(tmp_path: Path, index_server, provision_bin: str, label: str):
    """A trial of a patched file that sleeps in its runs, started and waited for until its file is in the venv:
    (the tool, the file, its content before, the patch, the running `provision try`)."""
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    tool("baseline", "tiny", "--runs", "3")
    target = site_of(tool) / "alpha" / "__init__.py"
    original = target.read_bytes()
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 0.5\n")
    running = tool.popen(
        "try", "tiny", label, "--file", f"alpha/__init__.py={patched}", "--env", "TRY_SLEEP=30", "--runs", "3"
    )
    deadline = time.time() + 60
    while time.time() < deadline and target.read_bytes() == original:
        time.sleep(0.1)
    return tool, target, original, patched, running


@pytest.mark.slow
def test_restore_puts_back_a_killed_trial_and_a_second_trial_waits_for_none(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, target, original, patched, running = held_trial(tmp_path, index_server, provision_bin, "held")
    second = tool("try", "tiny", "second", "--env", "TRY_FACTOR=2", "--runs", "3", check=False)
    assert second.returncode == 7 and "a trial is under way on tiny" in second.stderr
    assert target.read_bytes() == patched.read_bytes()  # the running trial's file is not taken for a leftover
    accepting = tool("accept", "tiny", check=False)  # nor ever for known-good
    assert accepting.returncode == 7 and "a trial is under way on tiny" in accepting.stderr
    os.kill(running.pid, signal.SIGKILL)
    running.communicate(timeout=30)
    restored = json.loads(tool("restore", "tiny", "--json").stdout)
    assert restored["drift_before"]["status"] == "pass" and target.read_bytes() == original


def test_what_the_command_line_gets_wrong_is_refused_first(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    for args, said in (
        (["tiny"], "give the trial a LABEL"),
        (["tiny", "x"], "nothing to try"),
        (["tiny", "x", "--env", "1A=2"], "is not NAME=VALUE"),
        (["tiny", "x", "--file", "alpha/__init__.py"], "is not PATH=SOURCE"),
        (["tiny", "x", "--file", "/etc/passwd=/etc/passwd"], "not a file in the environment's venv"),
        (["tiny", "x", "--recipe", "warp-drive"], "no recipe 'warp-drive'"),
        (["tiny", "x", "--replay", "other"], "give no LABEL or change"),
    ):
        done = tool("try", *args, check=False)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
    assert json.loads(tool("trials", "--json").stdout) == {"schema_version": 1, "trials": []}


@pytest.mark.slow
def test_ctrl_c_mid_trial_puts_the_file_back_before_it_exits(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, target, original, _, running = held_trial(tmp_path, index_server, provision_bin, "stopped")
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 130 and "interrupted" in err
    assert (
        target.read_bytes() == original and not (Path(tool.envs()["tiny"]["path"]) / ".trial-made").exists()
    )
    assert json.loads(tool("trials", "tiny", "--json").stdout)["trials"] == []
