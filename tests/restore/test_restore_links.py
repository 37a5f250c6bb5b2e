"""Links inside a venv that lead out of it: site-packages itself, lib/pythonX.Y, a package folder, a file restore would
reinstall over, a start-up file it would set aside. `restore` (and `--dry-run`) refuses, naming the link and where it
leads, exit 7, and nothing inside or outside the environment changes; the drift check reads nothing out there. An
adopted venv reached through the user's own link is not such a link."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import tiny

from provision.envs import drift
from provision.envs.home import RESTORING

TOOL_WITH_ENV = True  # conftest's `tool`: a home with profile tiny served on 127.0.0.1, environment tiny made


def venv_of(tool: tiny.Tool) -> Path:
    (build,) = (tool.home / "builds").iterdir()
    return build / "venv"


def snapshot(folder: Path) -> dict[str, str | bytes]:
    """Every entry under `folder` (bytecode aside): a link's target, a file's bytes, a folder's mark."""
    found: dict[str, str | bytes] = {}
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for entry in [*dirs, *files]:
            path = Path(parent) / entry
            key = str(path.relative_to(folder))
            if key in (drift.CACHE_NAME, RESTORING) or key.endswith(".lock"):
                continue  # what the drift check remembers hashing, and the build's lock files: provision's own
            found[key] = (
                f"-> {os.readlink(path)}"
                if path.is_symlink()
                else path.read_bytes()
                if path.is_file()
                else "dir"
            )
    return found


def move_out(inside: Path, outside: Path) -> None:
    """Put `inside` at `outside` and leave a link to it in its place."""
    shutil.move(str(inside), str(outside))
    inside.symlink_to(outside)


def refused(tool: tiny.Tool, link: Path, target: Path, *args: str) -> None:
    """restore (and its dry run) exits 7 with one error naming the link and its target, and changes nothing."""
    venv = venv_of(tool)
    before = (snapshot(venv.parent), snapshot(target.parent))
    for extra in (("--dry-run",), ()):
        done = tool("restore", "tiny", "--no-checks", *extra, *args, check=False)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
        assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: "), done.stderr
        assert f"{link} is a link to {target}" in lines[-2] and "provision restore tiny again" in lines[-1], (
            done.stderr
        )
        assert (snapshot(venv.parent), snapshot(target.parent)) == before, (
            "nothing inside or outside was changed"
        )


def test_site_packages_as_a_link_out_is_refused_and_the_drift_check_reads_nothing_there(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    site = drift.site_packages(venv_of(tool))
    outside = tmp_path / "outside" / "site-packages"
    outside.parent.mkdir()
    move_out(site, outside)
    (outside / "alpha" / "__init__.py").write_text("patched = True\n")
    (outside / "zz-experiment.pth").write_text("import os\n")
    refused(tool, site, outside)
    done = tool("restore", "tiny", "--no-checks", "--json", check=False)
    assert json.loads(done.stdout)["error"]["exit_code"] == 7
    check = tool("check", "tiny", "--only", "drift", "--json", check=False)
    (result,) = json.loads(check.stdout)["checks"]
    assert (
        check.returncode == 1
        and result["status"] == "error"
        and f"{site} is a link to {outside}" in result["reason"]
    )
    assert (outside / "alpha" / "__init__.py").read_text() == "patched = True\n"


def test_lib_python_as_a_link_out_is_refused(tool: tiny.Tool, tmp_path: Path) -> None:
    lib = drift.site_packages(venv_of(tool)).parent
    outside = tmp_path / "outside" / lib.name
    outside.parent.mkdir()
    move_out(lib, outside)
    (outside / "site-packages" / "alpha" / "__init__.py").write_text("patched = True\n")
    refused(tool, lib, outside)


def test_a_package_folder_leading_out_is_not_read_by_drift_and_restore_refuses(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    site = drift.site_packages(venv_of(tool))
    outside = tmp_path / "outside" / "alpha"
    outside.parent.mkdir()
    move_out(site / "alpha", outside)
    (outside / "__init__.py").write_text("patched = True\n")
    (result,) = json.loads(tool("check", "tiny", "--only", "drift", "--json", check=False).stdout)["checks"]
    (finding,) = result["details"]["findings"]
    assert result["status"] == "warn" and finding["path"] == "alpha/__init__.py"
    assert f"{site / 'alpha'} leads out of the environment to {outside}: not read" in finding["found"]
    refused(tool, site / "alpha", outside)


def test_a_file_to_reinstall_over_or_to_set_aside_leading_out_is_refused(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    site = drift.site_packages(venv_of(tool))
    secret = tmp_path / "outside" / "secret.py"
    secret.parent.mkdir()
    secret.write_text("KEEP = 1\n")
    (site / "alpha" / "__init__.py").unlink()
    (site / "alpha" / "__init__.py").symlink_to(secret)
    refused(tool, site / "alpha" / "__init__.py", secret)
    (site / "alpha" / "__init__.py").unlink()
    tool("restore", "tiny", "--no-checks")  # the link gone, restore puts the file back
    (site / "zz-experiment.pth").symlink_to(secret)
    refused(tool, site / "zz-experiment.pth", secret)


def test_an_adopted_venv_through_the_users_own_link_is_restored_but_a_link_out_inside_it_is_refused(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    real = tmp_path / "srv" / "real-venv"
    real.parent.mkdir()
    subprocess.run([tiny.PY, "-m", "venv", "--without-pip", str(real)], check=True, timeout=120)
    # the user's own link to the venv: that one is theirs, not refused
    (tmp_path / "srv" / "venv").symlink_to(real)
    tool("adopt", "old", str(tmp_path / "srv" / "venv"))
    site = drift.site_packages(real)
    (site / "sitecustomize.py").write_text("import sys\n")
    done = json.loads(tool("restore", "old", "--no-checks", "--json").stdout)
    assert done["set_aside"] == ["sitecustomize.py"] and not (site / "sitecustomize.py").exists()
    outside = tmp_path / "outside" / "site-packages"
    outside.parent.mkdir()
    move_out(site, outside)
    (outside / "sitecustomize.py").write_text("import sys\n")
    before = snapshot(outside)
    for extra in (("--dry-run",), ()):
        failed = tool("restore", "old", "--no-checks", *extra, check=False)
        assert failed.returncode == 7 and f"{site} is a link to {outside}" in failed.stderr, failed.stderr
    assert snapshot(outside) == before


def test_a_set_aside_folder_leading_out_of_the_build_folder_is_refused(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    venv = venv_of(tool)
    outside = tmp_path / "outside" / "set-aside"
    outside.mkdir(parents=True)
    (venv.parent / "set-aside").symlink_to(outside)
    (drift.site_packages(venv) / "zz-experiment.pth").write_text("import os\n")
    refused(tool, venv.parent / "set-aside", outside)
    assert list(outside.iterdir()) == []


def test_a_restore_lock_that_is_a_link_out_or_a_pipe_is_never_followed_nor_waited_on(
    tool: tiny.Tool, tmp_path: Path
) -> None:
    venv = venv_of(tool)
    lock = venv.parent / RESTORING
    lock.unlink(missing_ok=True)
    outside = tmp_path / "outside" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("keep me\n")
    lock.symlink_to(outside)
    done = tool("restore", "tiny", "--no-checks", check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 7 and "Traceback" not in done.stderr, done.stderr
    assert lines[-2] == f"error: {lock} is not a file provision wrote (a link, a pipe or a device)", (
        done.stderr
    )
    assert lines[-1].startswith(f"hint: remove it (rm {lock})"), done.stderr
    assert outside.read_text() == "keep me\n", "the pid was written through the link"
    lock.unlink()
    # remove (and gc, create --replace) ask whether a restore holds the build: a pipe never answers
    os.mkfifo(lock)
    done = subprocess.run(
        [tool.binary, "remove", "tiny", "--force"], capture_output=True, text=True, timeout=30, env=tool.env()
    )
    assert done.returncode == 0 and not venv.parent.exists(), done.stderr
