"""A wheel whose missing SM affects only some features (sgl-deep-ep: DeepEP's expert parallelism; sgl-flash-mla: MLA
attention) takes those features away in `report --lock` and `report --env`, naming the flags and models that need
them; it FAILs the stack only where the profile serves that feature (`serves`). Where `report` of the profile and
`report --lock` of its lock still differ, the lock's report says why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tomlkit
from conftest import ROOT
from launch import run_provision
from test_lockscan import TAG, cubin, lock_target, report, write_lock

from provision.errors import ProfileError
from provision.stacks import profiles

RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def serve(index_server) -> tuple[object, list[Path]]:
    default = index_server.index("default")
    return default, [
        default.add(
            "torch",
            "2.14.1",
            tag=TAG,
            files={"torch/lib/a.cubin": cubin(90), "torch/lib/b.cubin": cubin(120)},
        ),
        default.add(
            "sgl-deep-ep", "0.1.2.post1", tag=TAG, files={"deep_ep/lib/k.cubin": cubin(90)}
        ),  # sm_90, sm_100, sm_103
    ]


def with_serves(lock: Path, serves: list[str]) -> Path:
    doc = tomlkit.parse(lock.read_text())
    doc["tool"]["provision"].update(
        {"profile": "mine", "cuda": "13.0", **({"serves": serves} if serves else {})}
    )
    lock.write_text(tomlkit.dumps(doc))
    return lock


def test_a_feature_wheel_takes_its_feature_away_unless_the_profile_serves_it(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    default, wheels = serve(index_server)
    plain = with_serves(write_lock(tmp_path / "pylock.plain.toml", default, wheels), [])
    target = lock_target(report(provision_bin, plain, RTX, tmp_path / "cache"))
    gate = next(g for g in target["gates"] if g["id"] == "wheel:sgl-deep-ep")
    assert (
        gate["kind"] == "feature"
        and gate["status"] == "fail"
        and "wheel:sgl-deep-ep" in target["features_off"]
    )
    assert "takes away deepep (DeepEP's expert-parallel all-to-all kernels, import deep_ep)" in gate["reason"]
    assert (
        "--moe-a2a-backend deepep" in gate["reason"] and "sgl-deep-ep 0.1.2.post1 METADATA" in gate["source"]
    )
    # torch carries sm_120: nothing the stack serves fails
    assert target["verdict"] != "fail", target["gates"]
    served = with_serves(write_lock(tmp_path / "pylock.served.toml", default, wheels), ["deepep"])
    target = lock_target(report(provision_bin, served, RTX, tmp_path / "cache"))
    gate = next(g for g in target["gates"] if g["id"] == "wheel:sgl-deep-ep")
    assert (
        gate["kind"] == "stack"
        and target["verdict"] == "fail"
        and "the profile serves deepep" in gate["reason"]
    )


def test_the_lock_says_why_its_verdict_differs_from_the_profiles(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """cu130's tables say PASS on the 8 x RTX PRO 6000; a lock of it whose torch carries nothing for sm_120 FAILs, and
    says that `provision report` reads the tables and the lock its wheels."""
    default = index_server.index("default")
    wheels = [default.add("torch", "2.14.1", tag=TAG, files={"torch/lib/a.cubin": cubin(90)})]
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)  # [tool.provision] profile = "cu130"
    done = run_provision(
        "report",
        "--lock",
        str(lock),
        "--machine",
        str(RTX),
        "--profile",
        "cu130",
        "--json",
        timeout=120,
        env={"UV_CACHE_DIR": str(tmp_path / "c"), "XDG_CACHE_HOME": str(tmp_path / "x")},
    )
    targets = {t["kind"]: t for t in json.loads(done.stdout)["machines"][0]["targets"]}
    assert targets["profile"]["verdict"] != targets["lock"]["verdict"] == "fail"
    (versus,) = [g for g in targets["lock"]["gates"] if g["id"] == "versus-profile"]
    assert versus["status"] == "info" and "judges profile cu130" in versus["reason"]
    assert "from its tables" in versus["reason"] and "torch-wheels FAIL" in versus["reason"]


def test_report_env_judges_a_feature_wheel_as_the_feature_it_is(tmp_path: Path, provision_bin: str) -> None:
    from wheelhouse import build_wheel

    from provision.stacks import uvtool

    wheels = tmp_path / "wheels"
    build_wheel(wheels, "sgl-flash-mla", "1.0.0", files={"flash_mla/lib/k.cubin": cubin(90)})
    build_wheel(wheels, "other-kernels", "1.0", files={"other/lib/k.cubin": cubin(120)})
    venv = tmp_path / "venv"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "--quiet",
            "sgl-flash-mla",
            "other-kernels",
        ]
    )
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "old", str(venv), "--no-lock", *home, check=True)
    done = run_provision("report", "--machine", str(RTX), "--env", "old", "--json", *home, timeout=120)
    env = next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "environment")
    by_id = {g["id"]: g for g in env["gates"]}
    assert by_id["scan"]["status"] == "pass" and "sgl-flash-mla aside" in by_id["scan"]["reason"]
    mla = by_id["wheel:sgl-flash-mla"]
    assert (
        mla["kind"] == "feature"
        and mla["status"] == "fail"
        and "--attention-backend flashmla" in mla["reason"]
    )
    assert "wheel:sgl-flash-mla" in env["features_off"]


def test_serves_names_only_known_features(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'schema = 1\nname = "p"\ncuda = "13.0"\nserves = ["deepep", "flashmla"]\n[packages]\nx = {}\n'
    )
    assert profiles.load(str(path)).serves == ("deepep", "flashmla")
    path.write_text('schema = 1\nname = "p"\ncuda = "13.0"\nserves = ["deep-ep"]\n[packages]\nx = {}\n')
    try:
        profiles.load(str(path))
    except ProfileError as exc:
        assert "unknown feature 'deep-ep' (known: deepep, flashmla" in exc.message
    else:
        raise AssertionError("an unknown feature was accepted")
