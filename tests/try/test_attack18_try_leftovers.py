"""A `try --file` that fails leaves the home as it was, but for what it says it leaves. The copy of each trial file
kept for `--replay` (BUILD/trial-files/) was written before anything was checked, and stayed with no trial naming it
when the trial was refused (a file drifted already) or stopped (a full disk, Ctrl-C); a full disk that took the
record of the trial's files (BUILD/.trial-made) left the copies of the venv's own files it had saved for putting back
(BUILD/trial-saved/), which nothing would ever read or remove."""

from __future__ import annotations

import signal
from pathlib import Path

import fulldisk
import pytest
import tiny
from test_try import held_trial, site_of, tool_with_baseline

from provision.envs import drift

# the locks a trial takes (its own, the build's restore lock, the ledger's): empty files beside env.json, kept as
# every lock file of the home is, so that one who waits on one never waits on a file removed under it
LOCKS = {".trial.lock", ".restoring", ".trials.json.lock"}


def test_a_trial_refused_for_drift_keeps_no_copy_of_its_file(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool, _ = tool_with_baseline(tmp_path, index_server, provision_bin)
    build = Path(tool.envs()["tiny"]["path"]).resolve()
    (site_of(tool) / "alpha" / "__init__.py").write_text("FACTOR = 0.5\n")
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 1.1\n")
    before = fulldisk.tree(build)

    done = tool("try", "tiny", "lever", "--file", f"alpha/__init__.py={patched}", "--runs", "3", check=False)
    assert done.returncode == 7 and "differs from its known-good state already" in done.stderr, done.stderr
    assert fulldisk.tree(build) - before <= LOCKS, sorted(fulldisk.tree(build) - before)


# the baseline a trial runs: 100 tok/s
BASELINE = (
    '[baseline]\ncommand = ["python", "-c", "print(\'decode 100 tok/s\')"]\n'
    'pattern = \'decode ([\\d.]+) tok/s\'\nunit = "tok/s"\nbetter = "higher"\ntimeout = 60\n'
)


@pytest.mark.parametrize("pages", range(9))
def test_a_trial_stopped_by_a_full_home_leaves_only_what_it_says(
    tmp_path: Path, provision_bin: str, index_server, small_disk, pages: int
) -> None:
    """The disk filled with `pages` of 4 KiB left: the trial's copies, the saved copies, the record of the trial's
    files, the trial's files in the venv or the ledger is the write that fails, as the room runs out."""
    tool = fulldisk.tool_on(tmp_path, provision_bin, index_server)
    tiny.profile(tool.profiles, extra=BASELINE)
    tool.create("tiny", "--no-checks")
    tool("baseline", "tiny", "--runs", "3")
    build = tiny.build_of(tool)
    site = drift.site_packages(build / "venv")
    (tmp_path / "one.py").write_text("FACTOR = 1.1\n")
    (tmp_path / "two.py").write_text("TWO = 2\n")
    disk = small_disk(tmp_path / "disk")
    before = fulldisk.tree(disk.view(build))
    module = disk.view(site / "alpha" / "__init__.py")
    original = module.read_text()
    disk.fill(leave=pages << 12)

    done = disk.run(
        "try",
        "tiny",
        "lever",
        *(
            "--file",
            f"alpha/__init__.py={tmp_path / 'one.py'}",
            "--file",
            f"alpha/two.py={tmp_path / 'two.py'}",
        ),
        *("--runs", "3"),
        env=tool.env(),
    )
    made = fulldisk.tree(disk.view(build)) - before
    if done.returncode == 0:
        assert {"trials.json", "trial-files"} <= made, sorted(made)
    elif "cannot put the trial's files back" in done.stderr:
        # the one failure that says it leaves the trial's files and their record, until there is room
        assert done.returncode == 7, done.stderr
        disk.unfill()
        assert disk.run("check", "tiny", "--only", "drift", env=tool.env()).returncode == 0
        made = fulldisk.tree(disk.view(build)) - before
        assert made <= LOCKS, sorted(made)
    else:
        assert done.returncode in (3, 7) and "No space left on device" in done.stderr, done.stderr
        assert made <= LOCKS, sorted(made)
    assert module.read_text() == original and not disk.view(site / "alpha" / "two.py").exists()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_trial_stopped_by_sigterm_or_sighup_puts_its_files_back_first(
    tmp_path: Path, index_server, provision_bin: str, stop: signal.Signals
) -> None:
    """`timeout 600 provision try ...`, systemd stopping the unit, a terminal closed: SIGTERM or SIGHUP killed
    provision where it stood, as kill -9 does, and the venv ran the trial's file (the active one too, through
    HOME/active/venv) until the next provision command on it. Now they end the trial as Ctrl-C does: the file put back,
    the workload ended, exit 130."""
    tool, target, original, _, running = held_trial(tmp_path, index_server, provision_bin, "stopped")
    build = Path(tool.envs()["tiny"]["path"]).resolve()
    running.send_signal(stop)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 130 and "interrupted" in err, (running.returncode, err)
    assert target.read_bytes() == original
    assert not (build / ".trial-made").exists() and not (build / "trial-saved").exists()
    # the workload's own variable (the profile's [env]: test_try's tool_with_baseline)
    workload = f"TRY_STATE={tmp_path / 'state-tiny'}".encode()
    assert not running_with(workload), "the trial's workload outlived it"


def running_with(variable: bytes) -> list[int]:
    """The processes whose environment holds `variable` (those this user may read)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and variable in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_trial_started_in_the_background_of_a_script_still_stops_on_sigterm(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """`provision try ... &` in a script (`sh -c`, no job control): the shell starts it with SIGINT ignored, as POSIX
    says, and Python keeps it so. SIGTERM, turned into a SIGINT nobody hears, was lost: `kill $!` or timeout(1) let
    the trial run every run to its end (before SIGTERM at least killed it). It ends the trial as Ctrl-C would."""
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        tool, target, original, _, running = held_trial(tmp_path, index_server, provision_bin, "behind")
    finally:
        signal.signal(signal.SIGINT, ignored)
    running.send_signal(signal.SIGTERM)
    try:
        _, err = running.communicate(timeout=20)
    finally:
        # a trial the signal did not stop is not left running
        running.kill()
    assert running.returncode == 130 and "interrupted" in err, (running.returncode, err)
    assert target.read_bytes() == original
