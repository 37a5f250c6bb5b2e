"""The command line's conventions, on the installed `provision` run as a real process: errors as one line and a hint
(and a JSON document under --json), usage errors in the same form, --home on the group or the command, -v and -q,
one version, short help lines, completion of environment and profile names."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import click
import pytest
from launch import run_provision
from test_imports import by_click

import provision
from provision.cli.main import COMMANDS, cli


def provision_run(
    binary: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """No PROVISION_HOME unless `env` sets one: these tests are about where the home comes from."""
    return run_provision(*args, timeout=120, env={"PROVISION_HOME": None, **(env or {})})


def adopted_home(binary: str, tmp_path: Path, *names: str) -> Path:
    """A home holding real venvs (made by uv) adopted under `names`."""
    from provision.stacks import uvtool

    home = tmp_path / "home"
    for name in names:
        venv = tmp_path / f"venv-{name}"
        uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet", "--no-project"])
        done = provision_run(binary, "adopt", name, str(venv), "--home", str(home))
        assert done.returncode == 0, done.stderr
    return home


def test_an_error_under_json_is_a_document_on_stdout_and_a_line_on_stderr(
    provision_bin: str, tmp_path: Path
) -> None:
    done = provision_run(provision_bin, "switch", "nope", "--home", str(tmp_path), "--json")
    assert done.returncode == 7
    document = json.loads(done.stdout)
    assert document["schema_version"] == 1
    assert set(document["error"]) == {"message", "hint", "exit_code", "code"}
    assert document["error"]["exit_code"] == 7 and "nope" in document["error"]["message"]
    assert document["error"]["code"] == "env"  # the error class (docs/exit-codes.md), beside its exit code
    assert done.stderr.splitlines() == [
        f"error: {document['error']['message']}",
        f"hint: {document['error']['hint']}",
    ]
    plain = provision_run(provision_bin, "switch", "nope", "--home", str(tmp_path))
    assert plain.returncode == 7 and plain.stdout == "" and plain.stderr == done.stderr


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["switch", "--bogus"], "--bogus"),
        (["create"], "PROFILE"),
        (["scan", "x.so", "--require", "zz"], "compute capability"),
        (["nosuchcommand"], "nosuchcommand"),
        (["report", "--json", "--markdown"], "--markdown"),
    ],
)
def test_usage_errors_are_one_line_and_a_hint_with_exit_2(
    provision_bin: str, argv: list[str], words: str
) -> None:
    done = provision_run(provision_bin, *argv)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and words in lines[0], lines
    assert lines[1].startswith("hint: see provision") and lines[1].endswith("--help")
    assert "Usage:" not in done.stderr and "Traceback" not in done.stderr
    as_json = provision_run(provision_bin, *argv, "--json")
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"]["exit_code"] == 2
    assert json.loads(as_json.stdout)["error"]["code"] == "usage"


def test_home_on_the_group_or_on_the_command(provision_bin: str, tmp_path: Path) -> None:
    home = adopted_home(provision_bin, tmp_path, "one", "two")
    before = provision_run(provision_bin, "--home", str(home), "switch", "one", "--json")
    assert before.returncode == 0, before.stderr
    after = provision_run(provision_bin, "--home", str(home), "switch", "two", "--json")
    assert json.loads(after.stdout) == {
        "schema_version": 1,
        "previous": "one",
        "active": "two",
        "skipped": [],
    }
    listed = json.loads(
        provision_run(provision_bin, "envs", "--json", env={"PROVISION_HOME": str(home)}).stdout
    )
    assert listed["home"] == str(home) and [e["name"] for e in listed["environments"] if e["active"]] == [
        "two"
    ]
    # the command's own --home wins over the group's
    other = tmp_path / "other"
    both = json.loads(
        provision_run(provision_bin, "--home", str(home), "envs", "--home", str(other), "--json").stdout
    )
    assert both["home"] == str(other) and both["environments"] == []


def test_verbose_shows_the_commands_and_uvs_full_stderr(provision_bin: str, tmp_path: Path) -> None:
    quiet = provision_run(provision_bin, "envs", "--home", str(tmp_path), "--json")
    assert "$ " not in quiet.stderr
    # uv's cache folder not named by UV_CACHE_DIR: uv is asked, and -v shows it
    loud = provision_run(
        provision_bin,
        "-v",
        "envs",
        "--home",
        str(tmp_path),
        "--json",
        env={"UV_CACHE_DIR": None, "XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )
    assert loud.returncode == 0 and json.loads(loud.stdout)["home"] == str(tmp_path)
    assert any(
        line.startswith("$ ") and line.endswith("uv cache dir") for line in loud.stderr.splitlines()
    ), loud.stderr
    # uv fails: -v prints its argv and everything it wrote on stderr, then the one-line error
    failed = provision_run(provision_bin, "create", "cu130", "--python", "3.1", "--home", str(tmp_path), "-v")
    assert failed.returncode == 7, failed.stderr
    assert "$ " in failed.stderr and "python find 3.1" in failed.stderr
    assert "exited with code" in failed.stderr and "its stderr:" in failed.stderr
    assert failed.stderr.splitlines()[-2].startswith("error: Python 3.1 was not found")


def test_a_create_asks_uv_for_its_cache_folder_once(provision_bin: str, tmp_path: Path, index_server) -> None:
    """The lock's RECORD reader and the link mode both need uv's cache folder: one `uv cache dir` per process."""
    import tiny

    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    done = tool(
        "-v",
        "create",
        "tiny",
        "--python",
        tiny.PY,
        env={"UV_CACHE_DIR": None, "XDG_CACHE_HOME": str(tmp_path / "xdg")},
    )
    ran = [line for line in done.stderr.splitlines() if line.startswith("$ ")]
    assert sum(line.endswith(" cache dir") for line in ran) == 1 and any(
        " pip sync " in line for line in ran
    ), ran
    assert (tmp_path / "xdg/uv").is_dir()  # uv's own default, under XDG_CACHE_HOME


def test_uv_cache_dir_set_is_uvs_answer_without_asking(
    provision_bin: str, tmp_path: Path, index_server
) -> None:
    """UV_CACHE_DIR is uv's --cache-dir, before any uv.toml: where it is set, no `uv cache dir` is started (one
    process of about 0.03 s in every lock, create and report), and uv's cache is found there all the same."""
    import tiny

    # loses to UV_CACHE_DIR, in uv too
    (tmp_path / "uv.toml").write_text(f'cache-dir = "{tmp_path / "from-config"}"\n')
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    done = run_provision(
        "-v",
        "create",
        "tiny",
        "--python",
        tiny.PY,
        cwd=tmp_path,
        check=True,
        env=tool.env({"UV_CACHE_DIR": str(tmp_path / "uv-cache")}),
    )
    ran = [line for line in done.stderr.splitlines() if line.startswith("$ ")]
    assert not any(line.endswith(" cache dir") for line in ran) and any(
        " pip sync " in line for line in ran
    ), ran
    assert (tmp_path / "uv-cache").is_dir() and not (tmp_path / "from-config").exists()


def test_envs_in_a_folder_that_was_removed_lists_them(provision_bin: str, tmp_path: Path) -> None:
    """A shell whose folder is gone (cd into a build, then `provision remove` it): `provision envs` still lists them.
    Asking uv for its cache once per working folder made it `error: No such file or directory` (os.getcwd), exit 3."""
    import launch

    home = adopted_home(provision_bin, tmp_path, "one")
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        ["sh", "-c", 'rmdir "$0" && exec "$@"', str(gone), *launch.argv(("envs", "--home", home, "--json"))],
        cwd=gone,
        capture_output=True,
        text=True,
        timeout=120,
        env=launch.environment(),
    )
    assert done.returncode == 0 and [e["name"] for e in json.loads(done.stdout)["environments"]] == ["one"], (
        done.stderr
    )


def test_quiet_hides_informational_lines_but_not_results_or_errors(
    provision_bin: str, tmp_path: Path
) -> None:
    assert provision_run(provision_bin, "gc", "--home", str(tmp_path)).stderr == "nothing to clean\n"
    assert provision_run(provision_bin, "-q", "gc", "--home", str(tmp_path)).stderr == ""
    assert provision_run(provision_bin, "gc", "-q", "--home", str(tmp_path)).stderr == ""
    listed = provision_run(provision_bin, "gc", "-q", "--json", "--home", str(tmp_path))
    assert json.loads(listed.stdout)["removed"] == []
    error = provision_run(provision_bin, "-q", "switch", "nope", "--home", str(tmp_path))
    assert error.returncode == 7 and error.stderr.startswith("error: ")


def test_one_version_and_both_ways_in(provision_bin: str) -> None:
    assert metadata.version(provision.DISTRIBUTION) == provision.__version__
    for argv in (
        [provision_bin],
        [sys.executable, "-m", "provision"],
        [sys.executable, "-m", "provision.cli.main"],
    ):
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
        assert (
            done.returncode == 0
            and done.stdout.strip() == f"provision, version {provision.__version__} (cuda-provision)"
        ), argv


def test_every_command_is_registered_at_import_with_a_whole_short_help() -> None:
    context = click.Context(cli)
    assert cli.list_commands(context) == sorted(COMMANDS)
    assert {
        "probe",
        "scan",
        "report",
        "profiles",
        "lock",
        "create",
        "envs",
        "switch",
        "rollback",
        "remove",
        "gc",
        "adopt",
        "run",
        "shell-env",
        "check",
        "baseline",
        "compare",
        "bench",
    } <= set(COMMANDS)
    commands = [cli.get_command(context, name) for name in COMMANDS]
    assert [c.name for c in commands if c] == list(COMMANDS)
    for group in [c for c in commands if isinstance(c, click.Group)]:
        commands += group.commands.values()
    for command in commands:
        assert command.short_help and not command.short_help.endswith("..."), command.name
        assert len(command.short_help) <= 60, command.name  # fits beside the name in `provision --help`
    listing = run_provision("--help", timeout=60)
    commands_part = listing.stdout.split("Commands:")[1]
    assert "..." not in commands_part and "Make NAME the active environment." in commands_part


def complete(binary: str, *words: str, env: dict[str, str] | None = None) -> list[str]:
    line = ["provision", *words]
    done = provision_run(
        binary,
        env={
            "_PROVISION_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(line),
            "COMP_CWORD": str(len(line) - 1),
            **(env or {}),
        },
    )
    assert done.returncode == 0, done.stderr
    return [row.split(",", 1)[1] for row in done.stdout.splitlines() if row]


def test_completion_of_environment_and_profile_names(provision_bin: str, tmp_path: Path) -> None:
    home = adopted_home(provision_bin, tmp_path, "cu128-old", "cu130-new")
    assert complete(provision_bin, "switch", "", env={"PROVISION_HOME": str(home)}) == [
        "cu128-old",
        "cu130-new",
    ]
    assert complete(provision_bin, "--home", str(home), "check", "cu13") == ["cu130-new"]
    assert complete(provision_bin, "remove", "--home", str(home), "cu1") == ["cu128-old", "cu130-new"]
    assert complete(provision_bin, "switch", "x", env={"PROVISION_HOME": str(tmp_path / "none")}) == []
    assert sorted(complete(provision_bin, "create", "cu13")) == ["cu130", "cu130-stable"]
    assert "cu128" in complete(provision_bin, "lock", "")
    assert sorted(complete(provision_bin, "report", "--profile", "cu13")) == ["cu130", "cu130-stable"]
    assert complete(provision_bin, "report", "--env", "cu12", env={"PROVISION_HOME": str(home)}) == [
        "cu128-old"
    ]
    assert complete(provision_bin, "run", "cu13", env={"PROVISION_HOME": str(home)}) == ["cu130-new"]
    assert complete(provision_bin, "run", "cu130-new", "--", "pyth", env={"PROVISION_HOME": str(home)}) == []


def test_verbose_lines_never_show_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    from provision import log

    log.set_level(log.VERBOSE)
    try:
        log.debug("$ uv pip sync pylock.toml --index cu130=https://user:s3cret@mirror.example/simple")
        log.info("shown")
    finally:
        log.set_level(log.NORMAL)
    log.debug("hidden at the normal level")
    err = capsys.readouterr().err
    assert "s3cret" not in err and "https://****@mirror.example/simple" in err and "shown" in err
    assert "hidden" not in err


def test_escape_sequences_in_names_and_paths_never_reach_the_terminal(
    provision_bin: str, tmp_path: Path
) -> None:
    """A RECORD path, a file name or a child's output can carry ESC/OSC/BEL: tables, errors and progress show `?`."""
    from provision import log
    from provision.views import ui

    hostile = "x\x1b]0;owned\x07\x1b[2J\rname\x9b"
    assert log.printable(hostile) == "x?]0;owned??[2J?name?" and log.printable("a\tb\nc") == "a\tb\nc"
    table = ui.table(f"title {hostile}", "col")
    table.add_row(hostile)
    console = ui.console()
    with console.capture() as captured:
        console.print(table)
        console.print(hostile)
    assert "\x1b]" not in captured.get() and "\x07" not in captured.get() and "owned" in captured.get()
    missing = tmp_path / "no\x1b[31mfile.json"
    done = provision_run(provision_bin, "report", "--machine", str(missing))
    assert done.returncode == 2 and "\x1b" not in done.stderr and "no?[31mfile.json" in done.stderr


def test_a_command_imports_only_its_own_family(provision_bin: str, tmp_path: Path) -> None:
    """switch and rollback start in about the time of `import click`: no other command's module (not even the other
    environment commands'), no record class of env.json, no dataclass generated, no rich, no lock or index client,
    no packaging, no subprocess, beyond what `import click` itself loads on this Python (on 3.10 click loads subprocess,
    through uuid and platform). Each runs for real here, on a home of two adopted environments."""
    home = adopted_home(provision_bin, tmp_path, "a", "b")
    code = (
        "import sys\nfrom provision.cli.main import main\nsys.argv = ['provision', *sys.argv[1:]]\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    print('exit', exc.code)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('provision', 'rich', 'requests', 'packaging', 'dataclasses', 'tomllib', 'subprocess'))))"
    )
    for argv, wanted in (
        (["switch", "b"], 0),
        (["switch", "a"], 0),
        (["rollback"], 0),
        (["rollback", "--to", "a"], 0),
        (["switch", "nope"], 7),
        (["--version"], 0),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code, *argv, *(["--home", str(home)] if argv[0] != "--version" else [])],
            capture_output=True,
            text=True,
            timeout=60,
        )
        *_, exited, modules = done.stdout.splitlines()  # --version prints its line first
        assert exited == f"exit {wanted}", (argv, done.stdout, done.stderr)
        loaded = set(modules.split()) - by_click()
        assert {
            "provision.cli.machine",
            "provision.cli.stacks",
            "provision.cli.checks",
            "provision.cli.envs",
        }.isdisjoint(loaded), (argv, loaded)
        assert not {
            m for m in loaded if m.split(".")[0] in ("rich", "requests", "packaging", "tomllib", "subprocess")
        }, (argv, loaded)
        assert (
            not {
                "provision.stacks.lock",
                "provision.stacks.index",
                "provision.scan",
                "provision.envs.records",
                "provision.envs.lifecycle",
                "dataclasses",
            }
            & loaded
        ), (argv, loaded)
        # env.json's runs: not read
        assert not {m for m in loaded if m.startswith(("provision.checks", "provision.records"))}, (
            argv,
            loaded,
        )
    assert (home / "active").readlink() == Path("envs/a")
