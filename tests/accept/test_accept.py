"""`provision accept`: a team's own sitecustomize.py (and a patched module) become part of an environment's known-good
state; drift judges them by that content, restore puts that content back. Real venvs from the tests' own index."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import tiny
from launch import run_provision

from provision.envs import drift

PATCH = "import os\nos.environ.setdefault('SGLANG_DISABLE_CUSTOM_AR', '1')\n"


TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


build_of = tiny.build_of


def site_of(tool: tiny.Tool) -> Path:
    return drift.site_packages(build_of(tool) / "venv")


def drift_of(tool: tiny.Tool) -> dict:
    (result,) = json.loads(tool("check", "tiny", "--only", "drift", "--json").stdout)["checks"]
    return result


def findings(result: dict) -> set[tuple]:
    return {(f["kind"], f["distribution"], f["path"], f["known_good"]) for f in result["details"]["findings"]}


def test_an_accepted_sitecustomize_changed_by_an_experiment_is_restored_to_the_accepted_content(
    tool: tiny.Tool,
) -> None:
    site = site_of(tool)
    (site / "sitecustomize.py").write_text(PATCH)
    assert findings(drift_of(tool)) == {("unowned", None, "sitecustomize.py", None)}

    done = json.loads(tool("accept", "tiny", "sitecustomize.py", "--json").stdout)
    (accepted,) = done["accepted"]
    assert accepted["path"] == "sitecustomize.py" and accepted["owner"] is None
    assert accepted["sha256"] == hashlib.sha256(PATCH.encode()).hexdigest()
    assert (
        Path(accepted["copy"]).read_text() == PATCH
        and Path(accepted["copy"]).parent == build_of(tool) / "accepted"
    )
    record = json.loads((build_of(tool) / "env.json").read_text())
    assert [(k["path"], k["sha256"]) for k in record["accepted"]] == [
        ("sitecustomize.py", accepted["sha256"])
    ]
    assert drift_of(tool)["status"] == "pass", "the accepted file is the known-good state now"

    # the experiment
    (site / "sitecustomize.py").write_text(PATCH + "os.environ['EXPERIMENT'] = 'custom-ar'\n")
    result = drift_of(tool)
    assert findings(result) == {("modified", None, "sitecustomize.py", "accepted")}
    assert "modified sitecustomize.py [accepted]" in result["reason"]

    planned = json.loads(tool("restore", "tiny", "--dry-run", "--json").stdout)
    assert (
        planned["put_back"] == ["sitecustomize.py"]
        and planned["set_aside"] == []
        and planned["reinstall"] == []
    )
    restored = json.loads(tool("restore", "tiny", "--no-checks", "--json").stdout)
    assert (
        restored["put_back"] == ["sitecustomize.py"]
        and restored["set_aside"] == []
        and restored["aside_folder"] is None
    )
    assert restored["drift_after"]["status"] == "pass"
    assert (site / "sitecustomize.py").read_text() == PATCH, (
        "the accepted content, not the experiment's, and not set aside"
    )

    (site / "sitecustomize.py").unlink()
    assert findings(drift_of(tool)) == {("missing", None, "sitecustomize.py", "accepted")}
    tool("restore", "tiny", "--no-checks")
    assert (site / "sitecustomize.py").read_text() == PATCH


def test_an_accepted_patch_of_a_distributions_file_is_judged_by_its_accepted_hash_not_its_record(
    tool: tiny.Tool,
) -> None:
    site = site_of(tool)
    module = site / "alpha" / "__init__.py"
    module.write_text("__version__ = '1.0'\nPATCHED = True\n")
    assert findings(drift_of(tool)) == {("modified", "alpha", "alpha/__init__.py", None)}
    # absolute inside the venv
    (done,) = json.loads(tool("accept", "tiny", str(module), "--json").stdout)["accepted"]
    assert done["path"] == "alpha/__init__.py" and done["owner"] == "alpha 1.0"
    assert drift_of(tool)["status"] == "pass"

    # back to what RECORD says: for this environment, that is drift now
    module.write_text("__version__ = '1.0'\n")
    assert findings(drift_of(tool)) == {("modified", "alpha", "alpha/__init__.py", "accepted")}
    restored = json.loads(tool("restore", "tiny", "--no-checks", "--json").stdout)
    assert restored["reinstall"] == [] and restored["put_back"] == ["alpha/__init__.py"]
    assert module.read_text().endswith("PATCHED = True\n")

    dropped = json.loads(tool("accept", "tiny", "--drop", "alpha/__init__.py", "--json").stdout)
    assert dropped["dropped"] == ["alpha/__init__.py"] and dropped["files"] == []
    assert not list((build_of(tool) / "accepted").iterdir()), "the copy no file names any more is removed"
    assert findings(drift_of(tool)) == {("modified", "alpha", "alpha/__init__.py", None)}, (
        "judged by RECORD again"
    )


def test_accept_without_a_path_takes_every_changed_or_unowned_file_and_names_what_it_leaves(
    tool: tiny.Tool,
) -> None:
    site = site_of(tool)
    (site / "sitecustomize.py").write_text(PATCH)
    (site / "zz-team.pth").write_text("import os\n")
    (site / "alpha" / "__init__.py").unlink()
    done = json.loads(tool("accept", "tiny", "--json").stdout)
    assert sorted(f["path"] for f in done["accepted"]) == ["sitecustomize.py", "zz-team.pth"]
    assert done["not_accepted"] == [
        {
            "path": "alpha/__init__.py",
            "kind": "missing",
            "reason": "the lock decides a distribution's files, version and source: provision restore puts them back",
        }
    ]
    assert findings(drift_of(tool)) == {("missing", "alpha", "alpha/__init__.py", None)}
    shown = tool("accept", "tiny", "-q").stdout  # a result: on stdout, -q keeps it
    assert "tiny: 2 accepted file(s): sitecustomize.py, zz-team.pth" in shown


def test_a_path_outside_the_venv_a_link_out_and_a_fifo_are_refused_in_one_line_and_nothing_is_accepted(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    site = site_of(tool)
    outside = tmp_path / "secret.py"
    outside.write_text("TOKEN = 'x'\n")
    (site / "sitecustomize.py").write_text(PATCH)
    (site / "link-out.pth").symlink_to(outside)
    os.mkfifo(site / "pipe.pth")
    cases = {
        str(outside): "not a file in the environment's venv",
        "../../../../secret.py": "not a file in the environment's venv",
        "link-out.pth": f"is a link to {outside}, outside the environment",
        "pipe.pth": "not a regular file",
        "no-such.py": "No such file or directory",
    }
    for given, words in cases.items():
        done = tool("accept", "tiny", "sitecustomize.py", given, check=False)
        assert done.returncode == 2, (given, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: ") and words in lines[0], (given, done.stderr)
        assert "Traceback" not in done.stderr
    record = json.loads((build_of(tool) / "env.json").read_text())
    assert "accepted" not in record and not (build_of(tool) / "accepted").exists(), (
        "one refused: none accepted"
    )
    # without PATH: the link and the pipe are named, the rest kept
    done = json.loads(tool("accept", "tiny", "--json").stdout)
    assert [f["path"] for f in done["accepted"]] == ["sitecustomize.py"]
    assert {f["path"] for f in done["not_accepted"]} == {"link-out.pth", "pipe.pth"}
    assert tool("accept", "tiny", "--drop", "nothing.py", check=False).returncode == 2


def test_a_planted_accepted_path_out_of_the_venv_is_never_read_nor_written(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    record_path = build_of(tool) / "env.json"
    record = json.loads(record_path.read_text())
    record["accepted"] = [{"path": "../../../../../victim.txt", "sha256": "0" * 64}]
    record_path.write_text(json.dumps(record))
    result = drift_of(tool)
    assert result["status"] == "warn" and "outside the venv: not read" in json.dumps(result["details"])
    done = tool("restore", "tiny", "--no-checks", check=False)
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert victim.read_text() == "keep me\n"


FILES = '[files]\n"sitecustomize.py" = "patches/sitecustomize.py"\n"team/tuning.py" = "patches/tuning.py"\n'


def profile_with_files(tool: tiny.Tool, name: str = "fleet", packages: str = 'alpha = "==1.0"') -> Path:
    patches = tool.profiles / "patches"
    patches.mkdir(exist_ok=True)
    (patches / "sitecustomize.py").write_text(PATCH)
    (patches / "tuning.py").write_text("CUSTOM_AR = False\n")
    return tiny.profile(tool.profiles, name, packages, FILES)


def test_a_profiles_files_are_written_by_create_checked_by_drift_and_put_back_by_restore(
    tool: tiny.Tool,
) -> None:
    profile_with_files(tool)
    listed = next(
        p for p in json.loads(tool("profiles", "--json").stdout)["profiles"] if p["name"] == "fleet"
    )
    assert listed["files"] == [
        {
            "path": "sitecustomize.py",
            "source": str(tool.profiles / "patches" / "sitecustomize.py"),
            "sha256": hashlib.sha256(PATCH.encode()).hexdigest(),
        },
        {
            "path": "team/tuning.py",
            "source": str(tool.profiles / "patches" / "tuning.py"),
            "sha256": hashlib.sha256(b"CUSTOM_AR = False\n").hexdigest(),
        },
    ]
    tool.create("fleet", "--no-checks")
    build = tool.home.resolve() / "builds" / next(b for b in tool.builds() if b.startswith("fleet-"))
    site = drift.site_packages(build / "venv")
    assert (site / "sitecustomize.py").read_text() == PATCH and (
        site / "team" / "tuning.py"
    ).read_text() == "CUSTOM_AR = False\n"
    record = json.loads((build / "env.json").read_text())
    assert [(k["path"], k["source"]) for k in record["profile_files"]] == [
        ("sitecustomize.py", str(tool.profiles / "patches" / "sitecustomize.py")),
        ("team/tuning.py", str(tool.profiles / "patches" / "tuning.py")),
    ]
    (result,) = json.loads(tool("check", "fleet", "--only", "drift", "--json").stdout)["checks"]
    assert result["status"] == "pass" and "2 accepted or profile files their kept content" in result["reason"]

    (site / "team" / "tuning.py").write_text("CUSTOM_AR = True\n")  # edited on this machine
    (result,) = json.loads(tool("check", "fleet", "--only", "drift", "--json").stdout)["checks"]
    assert result["status"] == "warn" and findings(result) == {
        ("modified", None, "team/tuning.py", "profile")
    }
    restored = json.loads(tool("restore", "fleet", "--no-checks", "--json").stdout)
    assert restored["put_back"] == ["team/tuning.py"] and restored["set_aside"] == []
    assert (site / "team" / "tuning.py").read_text() == "CUSTOM_AR = False\n"

    from conftest import ROOT

    machine = str(ROOT / "docs/machines/rtx-pro-6000-x8.probe.json")
    document = json.loads(tool("report", "--machine", machine, "--env", "fleet", "--json").stdout)
    target = next(t for t in document["machines"][0]["targets"] if t["kind"] == "environment")
    assert [(k["origin"], k["path"]) for k in target["kept_files"]] == [
        ("profile", "sitecustomize.py"),
        ("profile", "team/tuning.py"),
    ]
    gate = next(g for g in target["gates"] if g["id"] == "kept-files")
    assert gate["status"] == "info" and "profile team/tuning.py" in gate["reason"]
    assert (
        "profile sitecustomize.py"
        in tool("report", "--machine", machine, "--env", "fleet", "--markdown").stdout
    )


def test_a_lock_made_before_a_profiles_file_changed_is_refused(tool: tiny.Tool, tmp_path: Path) -> None:
    profile_with_files(tool)
    lock = tmp_path / "pylock.fleet.toml"
    tool("lock", "fleet", "-o", str(lock))
    # the patch changed, the TOML did not
    (tool.profiles / "patches" / "tuning.py").write_text("CUSTOM_AR = True\n")
    done = tool.create("fleet", "--lock", str(lock), "--no-checks", check=False)
    assert (
        done.returncode == 7
        and "or a file its [files] carries changed since" in done.stderr
        and "Traceback" not in done.stderr
    ), done.stderr
    assert not [b for b in tool.builds() if b.startswith("fleet-")]


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ('"/etc/sitecustomize.py" = "patches/sitecustomize.py"', "must be a plain relative path"),
        ('"../../../bin/evil" = "patches/sitecustomize.py"', "must be a plain relative path"),
        ('"a//b.py" = "patches/sitecustomize.py"', "must be a plain relative path"),
        ('"alpha-1.0.dist-info/RECORD" = "patches/sitecustomize.py"', "lies in a distribution's metadata"),
        ('"sitecustomize.py" = "patches/missing.py"', "cannot be read (No such file or directory)"),
        ('"sitecustomize.py" = "../outside.py"', "must be a plain relative path"),
        ('"sitecustomize.py" = "patches/link-out.py"', "outside the profile's folder"),
        ('"sitecustomize.py" = "patches/pipe.py"', "not a regular file"),
        ('"sitecustomize.py" = "patches"', "not a regular file"),
        ('"sitecustomize.py" = 3', "expected the path of a file beside the profile"),
        ('files = "sitecustomize.py"', "expected a table of"),
    ],
)
def test_a_bad_files_table_is_one_line_naming_the_key_exit_4(
    tmp_path: Path, provision_bin: str, files: str, words: str
) -> None:
    from provision.errors import ProfileError
    from provision.stacks import profiles as loading

    folder = tmp_path / "profiles"
    (folder / "patches").mkdir(parents=True)
    (folder / "patches" / "sitecustomize.py").write_text(PATCH)
    (tmp_path / "outside.py").write_text("X = 1\n")
    (folder / "patches" / "link-out.py").symlink_to(tmp_path / "outside.py")
    os.mkfifo(folder / "patches" / "pipe.py")
    table = f"{files}\n" if files.startswith("files =") else f"[files]\n{files}\n"
    path = folder / "bad.toml"
    path.write_text(f'schema = 1\nname = "bad"\ncuda = "13.0"\n{table}[packages]\nalpha = "==1.0"\n')
    with pytest.raises(ProfileError) as caught:
        loading.load(str(path))
    assert caught.value.message.startswith(f"{path}: files") and words in caught.value.message, (
        caught.value.message
    )
    assert caught.value.exit_code == 4 and "\n" not in caught.value.message


def test_a_profile_whose_files_source_is_a_pipe_is_refused_by_the_command_not_waited_on(
    tmp_path: Path, provision_bin: str
) -> None:

    (tmp_path / "patches").mkdir()
    os.mkfifo(tmp_path / "patches" / "sitecustomize.py")
    path = tiny.profile(tmp_path, "piped", extra=FILES.split("\n", 2)[0] + "\n" + FILES.split("\n")[1] + "\n")
    done = run_provision("lock", str(path), timeout=60)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0] == (
        f'error: {path}: files."sitecustomize.py": the source {tmp_path}/patches/sitecustomize.py '
        "is not a regular file (a pipe, a socket, a device or a folder)"
    ), done.stderr


def test_create_replace_writes_accepted_files_again_where_they_still_belong_and_drops_the_rest_with_a_note(
    tool: tiny.Tool,
) -> None:
    site = site_of(tool)
    (site / "sitecustomize.py").write_text(PATCH)
    (site / "alpha" / "__init__.py").write_text("__version__ = '1.0'\nPATCHED = True\n")
    tool("accept", "tiny", "sitecustomize.py", "alpha/__init__.py")

    # the same lock: both still belong
    same = json.loads(tool.create("tiny", "--replace", "--no-checks", "--json").stdout)
    assert (
        same["accepted_reapplied"] == ["sitecustomize.py", "alpha/__init__.py"]
        and same["accepted_dropped"] == []
    )
    site = site_of(tool)
    assert (site / "sitecustomize.py").read_text() == PATCH and (
        site / "alpha" / "__init__.py"
    ).read_text().endswith("PATCHED = True\n")
    assert drift_of(tool)["status"] == "pass"

    tiny.profile(tool.profiles, "tiny", 'alpha = "==2.0"')  # a new release of the patched distribution
    done = tool.create("tiny", "--replace")
    assert (
        "note: the accepted alpha/__init__.py was not carried over: accepted over alpha 1.0, and this build has alpha 2.0"
        in done.stderr + done.stdout
    )
    site = site_of(tool)
    assert (site / "sitecustomize.py").read_text() == PATCH, "a file no distribution owns is written again"
    assert (site / "alpha" / "__init__.py").read_text() == "__version__ = '2.0'\n", (
        "2.0's own file, not 1.0's patch"
    )
    record = json.loads((build_of(tool) / "env.json").read_text())
    assert [k["path"] for k in record["accepted"]] == ["sitecustomize.py"]
    assert drift_of(tool)["status"] == "pass"


def test_a_path_two_distributions_install_once_accepted_is_judged_by_its_accepted_content(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    from test_drift_shared import provision, uv_venv

    served = index_server.index("main")
    served.add("cuda-python", "12.6.0", files={"cuda/bindings/driver.py": b"VERSION = '12.6'\n"})
    served.add("cuda-bindings", "13.0.0", files={"cuda/bindings/driver.py": b"VERSION = '13.0'\n"})
    venv = uv_venv(tmp_path, served.url, "cuda-python==12.6.0", "cuda-bindings==13.0.0")
    assert provision(provision_bin, tmp_path, "adopt", "old", str(venv), "--no-lock").returncode == 0
    done = provision(provision_bin, tmp_path, "accept", "old", "--json")
    assert done.returncode == 0, done.stderr
    (accepted,) = json.loads(done.stdout)["accepted"]
    assert accepted["path"] == "cuda/bindings/driver.py" and accepted["owner"] in (
        "cuda-python 12.6.0",
        "cuda-bindings 13.0.0",
    )
    (result,) = json.loads(
        provision(provision_bin, tmp_path, "check", "old", "--only", "drift", "--json").stdout
    )["checks"]
    assert result["status"] == "pass", result["reason"]


def test_a_store_folder_that_is_a_link_out_of_the_build_is_refused_and_nothing_is_written_there(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (build_of(tool) / "accepted").symlink_to(elsewhere)
    (site_of(tool) / "sitecustomize.py").write_text(PATCH)
    done = tool("accept", "tiny", "sitecustomize.py", check=False)
    assert done.returncode == 7 and "is a link to" in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )
    assert list(elsewhere.iterdir()) == [] and "accepted" not in json.loads(
        (build_of(tool) / "env.json").read_text()
    )
