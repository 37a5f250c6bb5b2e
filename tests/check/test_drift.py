"""drift and restore on real venvs built by `provision create` from the tests' own index: a patched file, a deleted file,
a dropped sitecustomize.py and .pth, a package upgraded by hand; each found, each undone, the rest untouched."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import stacks
from launch import interrupt, popen_provision, run_provision

from provision.envs import drift, filehash
from provision.stacks import uvtool

PY = sys.executable


class Env:
    """One environment built by the installed `provision`, with a uv cache of its own (patches in place reach it)."""

    def __init__(self, binary: str, root: Path, stack, **extra: str) -> None:
        self.binary, self.root, self.stack = binary, root, stack
        self.variables = {
            "PROVISION_HOME": str(root / "home"),
            "UV_CACHE_DIR": str(root / "uv-cache"),
            **extra,
        }
        self("create", "cu130", "--python", PY, *stacks.index_args(stack), "--no-checks")
        self.build = next((root / "home" / "builds").iterdir())
        self.venv = self.build / "venv"
        self.site = drift.site_packages(self.venv)

    def __call__(self, *args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = run_provision(*args, env=self.variables)
        if code is not None:
            assert done.returncode == code, (
                f"provision {' '.join(args)} exited {done.returncode}: {done.stderr}"
            )
        return done

    def json(self, *args: str, code: int | None = 0) -> dict:
        return json.loads(self(*args, "--json", code=code).stdout)

    def drift(self) -> dict:
        (result,) = self.json("check", "cu130", "--only", "drift")["checks"]
        return result

    def hashes(self) -> dict[str, tuple[str, int]]:
        """Every regular file of the venv (compiled bytecode aside): its sha256 and inode."""
        found = {}
        for folder, dirs, files in os.walk(self.venv):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for file in files:
                path = Path(folder) / file
                if path.is_file() and not path.is_symlink():
                    found[str(path.relative_to(self.venv))] = (
                        hashlib.sha256(path.read_bytes()).hexdigest(),
                        path.stat().st_ino,
                    )
        return found

    def file_requests(self) -> list[str]:
        return [r for index in self.stack.values() for r in index.requests if "/files/" in r]


@pytest.fixture
def env(tmp_path: Path, index_server, provision_bin: str) -> Env:
    return Env(provision_bin, tmp_path, stacks.cu130(index_server))


def patch_by_replacing(path: Path, text: str) -> None:
    """The way editors save: a new file renamed over the old one."""
    temp = path.with_suffix(".new")
    temp.write_text(path.read_text() + text)
    os.replace(temp, path)


def upgrade_by_hand(env: Env) -> None:
    pytorch = env.stack["pytorch"]
    pytorch.add("filelock", "3.21.0", tag=stacks.PY3)
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(env.venv / "bin" / "python"),
            "--index-url",
            pytorch.url,
            "--quiet",
            "--no-deps",
            "filelock==3.21.0",
        ],
        env={"UV_CACHE_DIR": env.variables["UV_CACHE_DIR"]},
    )


def test_a_fresh_environment_passes_and_a_second_run_reads_nothing(env: Env) -> None:
    first = env.drift()
    assert first["status"] == "pass", first["reason"]
    assert first["details"]["files"] > 10 and first["details"]["hashed"] == first["details"]["files"]
    second = env.drift()
    assert second["status"] == "pass" and second["details"]["hashed"] == 0
    assert second["details"]["remembered"] == second["details"]["files"]
    # a file whose mtime changed is read again, and only that one; same bytes: still PASS
    os.utime(env.site / "torch" / "__init__.py", ns=(1, 1))
    third = env.drift()
    assert third["status"] == "pass" and third["details"]["hashed"] == 1


def test_each_drift_is_found_and_restore_undoes_it_offline_leaving_the_rest_untouched(env: Env) -> None:
    before = env.hashes()
    patch_by_replacing(env.site / "torch" / "__init__.py", "FORCE_CUSTOM_ALL_REDUCE = True\n")
    (env.site / "ninja" / "__init__.py").unlink()
    (env.site / "sitecustomize.py").write_text("print('patched at start-up')\n")
    (env.site / "zz-experiment.pth").write_text("import os\n")
    upgrade_by_hand(env)

    result = env.drift()
    assert result["status"] == "warn"
    found = {(f["kind"], f["distribution"], f["path"]) for f in result["details"]["findings"]}
    assert found == {
        ("modified", "torch", "torch/__init__.py"),
        ("missing", "ninja", "ninja/__init__.py"),
        ("unowned", None, "sitecustomize.py"),
        ("unowned", None, "zz-experiment.pth"),
        ("other-version", "filelock", "filelock-3.21.0.dist-info"),
    }
    patched = next(f for f in result["details"]["findings"] if f["kind"] == "modified")
    assert (
        patched["found"]
        == filehash.record_digest(env.site / "torch" / "__init__.py", "sha256")
        != patched["expected"]
    )
    upgraded = next(f for f in result["details"]["findings"] if f["kind"] == "other-version")
    assert (upgraded["expected"], upgraded["found"]) == ("3.20.0", "3.21.0")
    for words in ("modified torch/__init__.py (torch)", "unowned sitecustomize.py", "other-version filelock"):
        assert words in result["reason"]

    planned = env.json("restore", "cu130", "--dry-run")
    assert planned["dry_run"] and planned["reinstall"] == ["filelock", "ninja", "torch"]
    assert planned["set_aside"] == ["sitecustomize.py", "zz-experiment.pth"] and planned["uninstall"] == []
    assert (env.site / "sitecustomize.py").exists(), "a dry run changes nothing"

    requests_before = len(env.file_requests())
    done = env.json("restore", "cu130", "--no-checks")
    assert not done["downloaded"] and len(env.file_requests()) == requests_before, "the cache had every wheel"
    assert done["drift_after"]["status"] == "pass"
    after = env.hashes()
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}
    reinstalled = ("site-packages/torch", "site-packages/ninja", "site-packages/filelock")
    untouched = [k for k in before if not any(part in k for part in reinstalled)]
    assert untouched and all(after[k][1] == before[k][1] for k in untouched), (
        "files of other distributions keep their inode"
    )
    aside = Path(done["aside_folder"])
    assert aside.parent.name == "set-aside" and aside.parent.parent == env.build
    assert (aside / "sitecustomize.py").read_text() == "print('patched at start-up')\n"
    assert (aside / "zz-experiment.pth").read_text() == "import os\n"
    assert env.drift()["status"] == "pass"
    assert not list(env.venv.parent.glob(".venv.restore-*")), "no staging copy is left"


def test_restore_uninstalls_a_distribution_the_lock_does_not_have(env: Env) -> None:
    env.stack["default"].add("leftover-tool", "1.0", tag=stacks.PY3)
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(env.venv / "bin" / "python"),
            "--index-url",
            env.stack["default"].url,
            "--quiet",
            "leftover-tool",
        ],
        env={"UV_CACHE_DIR": env.variables["UV_CACHE_DIR"]},
    )
    found = env.drift()["details"]["findings"]
    assert [(f["kind"], f["distribution"]) for f in found] == [("extra", "leftover-tool")]
    done = env.json("restore", "cu130", "--no-checks")
    assert done["uninstall"] == ["leftover-tool"] and done["drift_after"]["status"] == "pass"
    assert not (env.site / "leftover_tool").exists()


def cached_copies(env: Env, relative: str) -> list[str]:
    return [path.read_text() for path in (env.root / "uv-cache").rglob(relative)]


def test_a_file_patched_in_place_reaches_neither_uvs_cache_nor_another_environment(env: Env) -> None:
    """uv hard-links from its cache by default: a patch in place would patch the cache and every environment built
    from it (the cu128 one kept for rollback too). provision's environments own their files."""
    env(
        "create",
        "cu130",
        "--name",
        "other",
        "--python",
        PY,
        *stacks.index_args(env.stack),
        "--no-checks",
        "--no-activate",
    )
    target = env.site / "torch" / "__init__.py"
    other = drift.site_packages(env.root / "home" / "envs" / "other" / "venv") / "torch" / "__init__.py"
    assert target.stat().st_nlink == 1 and other.read_text() == target.read_text()
    assert cached_copies(env, "torch/__init__.py"), "uv's cache holds the unpacked wheel"
    with open(target, "a") as handle:  # in place, the way a quick experiment patches a file
        handle.write("FORCE_CUSTOM_ALL_REDUCE = True\n")
    assert "FORCE" not in other.read_text()
    assert not any("FORCE" in text for text in cached_copies(env, "torch/__init__.py"))
    requests_before = len(env.file_requests())
    done = env.json("restore", "cu130", "--no-checks")
    assert not done["downloaded"] and done["refreshed"] == [] and len(env.file_requests()) == requests_before
    assert done["drift_after"]["status"] == "pass" and "FORCE" not in target.read_text()


def test_with_hard_links_chosen_in_uv_link_mode_restore_fetches_the_damaged_cache_copy_again(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    # the user's choice wins
    env = Env(provision_bin, tmp_path, stacks.cu130(index_server), UV_LINK_MODE="hardlink")
    target = env.site / "torch" / "__init__.py"
    assert target.stat().st_nlink > 1, "uv hard-links from its cache on one file system"
    with open(target, "a") as handle:  # in place: the cache's copy is the same inode
        handle.write("FORCE_CUSTOM_ALL_REDUCE = True\n")
    done = env.json("restore", "cu130", "--no-checks")
    assert done["refreshed"] == ["torch"] and done["downloaded"]
    assert done["drift_after"]["status"] == "pass" and "FORCE" not in target.read_text()


def test_a_failed_restore_changes_nothing(env: Env, index_server) -> None:
    target = env.site / "torch" / "__init__.py"
    with open(target, "a") as handle:
        handle.write("FORCE_CUSTOM_ALL_REDUCE = True\n")
    (env.site / "sitecustomize.py").write_text("print(1)\n")
    before = env.hashes()
    shutil.rmtree(env.root / "uv-cache")  # uv's cache was cleaned since: the wheel must be fetched again
    index_server.down.add("pytorch")  # and the index is down
    failed = env("restore", "cu130", "--no-checks", code=5)
    assert "\nerror: index request failed" in failed.stderr and "\nhint: " in failed.stderr
    assert env.hashes() == before
    assert not list(env.venv.parent.glob(".venv.restore-*")) and not (env.build / "set-aside").exists()


def test_ctrl_c_during_restore_leaves_the_environment_as_it_was(env: Env) -> None:
    target = env.site / "torch" / "__init__.py"
    with open(target, "a") as handle:
        handle.write("FORCE_CUSTOM_ALL_REDUCE = True\n")
    before = env.hashes()
    shutil.rmtree(env.root / "uv-cache")  # uv's cache was cleaned since: the wheel must be fetched again
    # the refetch waits on the index: caught mid-restore, however
    held = env.stack["pytorch"].hold = threading.Event()
    earlier = len(env.stack["pytorch"].requests)  # loaded the machine (a 3 s delay let it finish first)
    process = subprocess.Popen(
        [env.binary, "restore", "cu130", "--no-checks"], stderr=subprocess.PIPE, text=True, env=env.variables
    )
    err = interrupt(process, held, started=lambda: len(env.stack["pytorch"].requests) > earlier)
    assert process.returncode == 130 and "interrupted" in err
    assert len(env.stack["pytorch"].requests) > earlier
    assert env.hashes() == before
    assert not list(env.venv.parent.glob(".venv.restore-*"))


def test_a_rollback_does_not_wait_for_a_restore_and_nothing_removes_what_it_holds(env: Env) -> None:
    # now active
    env("create", "cu130", "--name", "other", "--python", PY, *stacks.index_args(env.stack), "--no-checks")
    with open(env.site / "torch" / "__init__.py", "a") as handle:
        handle.write("FORCE_CUSTOM_ALL_REDUCE = True\n")
    shutil.rmtree(env.root / "uv-cache")  # the wheel must be fetched again, from a slow index
    held = env.stack["pytorch"].hold = threading.Event()  # the index answers when the test says so
    earlier = len(env.stack["pytorch"].requests)
    process = popen_provision("restore", "cu130", "--no-checks", "--json", env=env.variables)
    deadline = time.time() + 60
    while time.time() < deadline and len(env.stack["pytorch"].requests) == earlier:
        time.sleep(0.05)
    env("rollback")  # back to cu130 while it is being restored: HOME's lock is free
    env("switch", "other")
    assert process.poll() is None, "switch and rollback waited for the restore"  # it still waits on the index
    refused = env("remove", "cu130", code=7)
    assert (
        "cu130 is being restored (pid " in refused.stderr
        and "\nhint: wait for that restore" in refused.stderr
    )
    assert env("restore", "cu130", "--no-checks", code=7).stderr.startswith("error: cu130 is being restored")
    assert env("gc").returncode == 0 and env.build.exists()
    held.set()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert json.loads(out)["drift_after"]["status"] == "pass" and env.drift()["status"] == "pass"
    env("remove", "cu130")  # once it is done


def test_gc_removes_what_a_killed_restore_recorded_and_nothing_else(env: Env) -> None:
    """kill -9 after the swap leaves the old tree in a staging folder, named in BUILD/.restore-made; gc takes exactly
    that (a running restore holds the build's lock, and gc leaves its build alone: see the rollback test above)."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that existed and is gone
    killed = env.venv.parent / f".venv.restore-{dead.pid}-20261130T000000Z"
    # the same shape, not recorded: kept
    unrecorded = env.venv.parent / f".venv.restore-{dead.pid}-20261130T000001Z"
    for folder in (killed, unrecorded):
        (folder / "lib").mkdir(parents=True)
    (env.build / ".restore-made").write_text(json.dumps({"pid": dead.pid, "made": [str(killed)]}))
    done = env.json("gc")
    assert any(str(killed) in line for line in done["removed"]), done
    assert not killed.exists() and unrecorded.exists() and env.venv.is_dir()
    assert not (env.build / ".restore-made").exists()
    assert env.drift()["status"] == "pass"


def test_restore_of_a_clean_environment_does_nothing(env: Env) -> None:
    before = env.hashes()
    done = env.json("restore", "cu130", "--no-checks")
    assert (done["reinstall"], done["uninstall"], done["set_aside"], done["drift_after"]) == (
        [],
        [],
        [],
        None,
    )
    assert env.hashes() == before


def test_scripts_written_in_the_staging_copy_name_the_venv_after_the_swap(tmp_path: Path) -> None:
    from wheelhouse import build_wheel

    from provision.envs import relocate, restore

    files = {
        "tool_x/__init__.py": b"def main():\n    print('tool-x 2')\n",
        "tool_x-2.0.dist-info/entry_points.txt": b"[console_scripts]\ntoolx = tool_x:main\n",
    }
    wheel = build_wheel(tmp_path / "wheels", "tool-x", "2.0", files=files)
    venv, staging = tmp_path / "venv", tmp_path / ".venv.restore-1-x"
    uvtool.run(["venv", str(venv), "--python", PY, "--quiet"])
    subprocess.run(["cp", "-al", str(venv), str(staging)], check=True)
    uvtool.run(["pip", "install", "--python", str(staging / "bin" / "python"), "--quiet", str(wheel)])
    assert str(staging) in (staging / "bin" / "toolx").read_text()
    assert relocate.scripts(staging, venv, ["tool-x"]) == ["../../../bin/toolx"]
    assert drift.scan(staging).findings == [], "RECORD follows the rewritten script"
    restore.exchange(staging, venv)
    assert subprocess.run([venv / "bin" / "toolx"], capture_output=True, text=True).stdout == "tool-x 2\n"
    assert str(staging) not in (venv / "bin" / "toolx").read_text()


def test_restore_runs_the_checks_and_the_profiles_baseline_afterwards(env: Env) -> None:
    patch_by_replacing(env.site / "torch" / "__init__.py", "X = 1\n")
    done = env("restore", "cu130", "--json", code=None)
    result = json.loads(done.stdout)
    by_id = {r["id"]: r for r in result["checks"]}
    assert by_id["drift"]["status"] == "pass" and by_id["imports"]["status"] == "pass"
    stored = json.loads((env.build / "env.json").read_text())["checks"]["results"]
    assert [r["id"] for r in stored] == [r["id"] for r in result["checks"]]
    # the cu130 profile has a baseline: on a machine without a CUDA torch it says why it did not run
    assert (result["baseline"] is None) != (result["baseline_error"] is None)
    assert done.returncode == (1 if result["baseline_error"] else 0)


def use_baseline(build: Path, figure: str) -> None:
    meta = json.loads((build / "env.json").read_text())
    meta["baseline"] = {
        "command": ["python", "-c", f"print('throughput: {figure} tok/s')"],
        "cwd": ".",
        "timeout": 60,
        "pattern": r"throughput: ([0-9.]+) tok/s",
        "json_key": None,
        "unit": "tok/s",
        "better": "higher",
    }
    (build / "env.json").write_text(json.dumps(meta))


def test_each_baseline_keeps_the_drift_it_ran_on_compare_says_so_and_restore_measures_again(env: Env) -> None:
    env("create", "cu130", "--name", "second", "--python", PY, *stacks.index_args(env.stack), "--no-checks")
    second = Path(json.loads(env("envs", "--json").stdout)["environments"][1]["path"])
    use_baseline(env.build, "82.0")
    use_baseline(second, "89.5")
    clean = env.json("baseline", "cu130")
    assert clean["figure"] == 82.0 and clean["drift"]["status"] == "pass"
    patch_by_replacing(env.site / "torch" / "__init__.py", "FORCE_CUSTOM_ALL_REDUCE = True\n")
    (env.site / "sitecustomize.py").write_text("")
    drifted = env.json("baseline", "cu130")
    assert drifted["drift"]["status"] == "warn" and drifted["drift"]["counts"]["modified"] == 1
    assert "modified torch/__init__.py (torch)" in drifted["drift"]["findings"]
    env.json("baseline", "second")
    compared = env.json("compare", "second", "cu130")
    assert compared["drifted"] == ["cu130"]
    assert [r["drift"]["status"] for r in compared["environments"]] == ["pass", "warn"]
    table = env("compare", "second", "cu130").stdout
    assert "cu130's baseline was measured on a drifted environment (1 modified, 1 unowned)" in table

    restored = env("restore", "cu130").stdout
    assert "reinstalled from uv's cache, nothing downloaded" in restored
    assert "baseline: back to 82.00 tok/s (as locked it measured 82.00 tok/s" in restored
    last = json.loads((env.build / "env.json").read_text())["baselines"][-1]
    assert last["drift"]["status"] == "pass" and env.json("compare", "second", "cu130")["drifted"] == []


def test_report_env_shows_drift(env: Env) -> None:
    from conftest import ROOT

    machine = str(ROOT / "docs/machines/rtx-pro-6000-x8.probe.json")
    (env.site / "zz-experiment.pth").write_text("import os\n")
    document = env.json("report", "--machine", machine, "--profile", "cu130", "--env", "cu130")
    target = next(t for t in document["machines"][0]["targets"] if t["kind"] == "environment")
    gate = next(g for g in target["gates"] if g["id"] == "drift")
    assert gate["status"] == "warn" and "unowned zz-experiment.pth" in gate["reason"]
    markdown = env(
        "report", "--machine", machine, "--profile", "cu130", "--env", "cu130", "--markdown"
    ).stdout
    assert "unowned zz-experiment.pth" in markdown


def test_an_adopted_venv_without_a_lock_has_its_start_up_files_set_aside_and_says_what_it_cannot_restore(
    tmp_path: Path, provision_bin: str
) -> None:
    from wheelhouse import build_wheel

    wheel = build_wheel(
        tmp_path / "wheels", "sglang", "0.5.0", files={"sglang/communicator.py": b"CUSTOM_AR = False\n"}
    )
    venv = tmp_path / "srv" / "sglang-venv"
    uvtool.run(["venv", str(venv), "--python", PY, "--quiet"])
    uvtool.run(["pip", "install", "--python", str(venv / "bin" / "python"), "--quiet", str(wheel)])
    variables = {**os.environ, "PROVISION_HOME": str(tmp_path / "home")}

    def provision(*args: str) -> subprocess.CompletedProcess[str]:
        return run_provision(*args, timeout=120, env=variables)

    assert provision("adopt", "old", str(venv), "--no-lock").returncode == 0
    site = drift.site_packages(venv)
    patch_by_replacing(site / "sglang" / "communicator.py", "CUSTOM_AR = True\n")
    (site / "sitecustomize.py").write_text("import sys\n")
    (result,) = json.loads(provision("check", "old", "--only", "drift", "--json").stdout)["checks"]
    assert result["status"] == "warn" and "no lock (adopted)" in result["reason"]
    assert [(f["kind"], f["path"]) for f in result["details"]["findings"]] == [
        ("modified", "sglang/communicator.py"),
        ("unowned", "sitecustomize.py"),
    ]
    done = provision("restore", "old", "--no-checks", "--json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["not_restorable"] == ["sglang"] and document["set_aside"] == ["sitecustomize.py"]
    assert (
        not (site / "sitecustomize.py").exists()
        and (Path(document["aside_folder"]) / "sitecustomize.py").exists()
    )
    assert (site / "sglang" / "communicator.py").read_text().endswith("CUSTOM_AR = True\n"), (
        "without a lock it stays"
    )
    assert sorted(p.name for p in venv.parent.iterdir()) == ["sglang-venv"], (
        "nothing left beside the user's venv"
    )
