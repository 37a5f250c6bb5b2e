"""Records stored beside an environment (env.json) and in HOME (state.json): one reader and one writer, versioned,
old files still read, and a file of the wrong shape is one error line naming it, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from launch import run_provision
from test_cli import adopted_home, provision_run

from provision.envs import records
from provision.envs.records import EnvRecord, RecordError
from provision.records.allreduce_runs import AllreduceRun
from provision.records.results import BaselineRun, CheckResult, MachineStamp

# env.json as provision wrote it before records were versioned (keys as `create` wrote them, no schema_version)
OLD_ENV_JSON = {
    "name": "cu128",
    "profile": "cu128",
    "profile_hash": "ab12",
    "profile_path": "/p/cu128.toml",
    "cuda": "12.8",
    "python": "3.12",
    "interpreter": "/usr/bin/python3.12",
    "lock": "/h/locks/pylock.cu128-x.toml",
    "created": "2026-11-29T10:00:00+00:00",
    "adopted": False,
    "venv": "/h/builds/cu128-x/venv",
    "env": {"CUDA_HOME": "/h/builds/cu128-x/cuda"},
    "packages": ["torch"],
    "checks_required": [],
    "size_bytes": 1234,
    "baseline": None,
    "checks": {
        "results": [{"id": "imports", "title": "t", "status": "pass", "reason": "ok", "seconds": 0.1}],
        "at": "2026-11-29T10:01:00+00:00",
    },
    "baselines": [
        {
            "figure": 612.5,
            "unit": "TFLOP/s",
            "better": "higher",
            "at": "2026-11-29T10:05:00+00:00",
            "machine": {"summary": "8 x NVIDIA H200, driver 580", "id": "abc"},
            "command": ["python", "b.py"],
            "seconds": 12.0,
            "exit_code": 0,
            "output_tail": "",
            "details": {"bf16_gemm_tflops": 612.5},
        }
    ],
    "allreduce": [
        {
            "at": "2026-11-29T10:09:00+00:00",
            "backend": "gloo",
            "world_size": 2,
            "runs": [{"variant": {}, "rows": []}],
        }
    ],
}


def test_an_old_env_json_is_read_and_kept_through_a_rewrite(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "env.json").write_text(json.dumps({**OLD_ENV_JSON, "from_the_future": {"x": 1}}))
    record = records.read(build)
    assert record.cuda == "12.8" and record.env == {"CUDA_HOME": "/h/builds/cu128-x/cuda"}
    assert record.check_results[0].status == "pass" and record.checks is not None
    assert record.baselines[0].figure == 612.5 and record.baselines[0].machine.summary.startswith("8 x")
    assert record.allreduce[0].world_size == 2
    assert record.venv_path(build) == Path("/h/builds/cu128-x/venv")
    records.write(build, record)
    rewritten = json.loads((build / "env.json").read_text())
    assert rewritten == {
        **OLD_ENV_JSON,
        "from_the_future": {"x": 1},
        "schema_version": records.SCHEMA_VERSION,
    }
    assert records.read(build) == record


# what check, baseline and bench allreduce store today, every key of docs/json.md: typed on the way in, written back
# key for key; results from older versions lack keys (title, seconds, pattern...) and are written back without them
FULL_RUNS = {
    "env_template": {"env": {"FLASHINFER_CUDA_ARCH_LIST": "{arch_list}", "W": "{env}"}, "nvcc": "13.0"},
    "baseline": {
        "command": ["python", "bench.py"],
        "cwd": ".",
        "timeout": 600.0,
        "pattern": "throughput: ([0-9.]+)",
        "json_key": None,
        "unit": "tok/s",
        "better": "higher",
    },
    "checks": {
        "results": [
            {
                "id": "torch-cuda",
                "title": "torch sees every GPU",
                "status": "fail",
                "reason": "no GPU",
                "details": {"arch_list": ["sm_90"]},
                "output_tail": "Traceback ...",
                "seconds": 5.1,
            },
            {"id": "driver", "status": "pass", "reason": "ok"},  # an older result: no title, no seconds
            {
                "id": "drift",
                "title": "t",
                "status": "warn",
                "reason": "r",
                "seconds": 0.2,
                "from_the_future": 1,
            },
        ],
        "at": "T1",
    },
    "baselines": [
        {
            "figure": 783.6,
            "unit": "TFLOP/s",
            "better": "higher",
            "at": "T2",
            "machine": {"summary": "1 x H200", "id": "ab"},
            "command": ["python", "b.py"],
            "seconds": 3.0,
            "exit_code": 0,
            "output_tail": "",
            "details": None,
            "drift": {
                "status": "warn",
                "summary": "1 modified",
                "counts": {"modified": 1},
                "findings": ["modified x"],
            },
            "series": "T2",
        }
    ],
    "allreduce": [
        {
            "at": "T3",
            "backend": "nccl",
            "world_size": 2,
            "runs": [
                {
                    "variant": {"NCCL_ALGO": "allreduce:tree"},
                    "world_size": 2,
                    "rows": [
                        {
                            "size": 8,
                            "count": 2,
                            "wrong": 0,
                            "eager_us": 18.4,
                            "graph_us": 8.8,
                            "graph_launch_cpu_us": 3.0,
                            "eager_algbw": 0.0,
                            "eager_busbw": 0.0,
                            "graph_algbw": 0.0,
                            "graph_busbw": 0.0,
                            "nccl_tests_eager_us": 20.6,
                            "nccl_tests_eager_busbw": 0.0,
                            "eager_ratio": 0.89,
                            "torch_overhead_eager_us": -2.2,
                            "nccl_tests_graph_us": 5.87,
                            "nccl_tests_graph_busbw": 0.0,
                            "graph_ratio": 1.5,
                            "torch_overhead_graph_us": 2.93,
                        }
                    ],
                    "pattern": {"122x42KB_ms": 0.9, "2x2.5MB_ms": 0.06, "122x42KB_launch_cpu_ms": 0.1},
                    "teardown": [
                        {"clean": True, "how": "exit", "seconds": 0.2},
                        {"clean": False, "step": "free graphs", "note": "killed"},
                        {"clean": None},
                    ],
                    "nccl_nvls_enable": "0",
                    "nccl_tests": {
                        "path": "/x/all_reduce_perf",
                        "nccl_library": "2.28.9",
                        "eager": [
                            {
                                "size": 8,
                                "time_us": 20.6,
                                "algbw": 0.0,
                                "busbw": 0.0,
                                "wrong": 0,
                                "out_of_place_us": 20.1,
                            }
                        ],
                        "graph": [],
                        "pattern": {"122x42KB_ms": 0.895, "2x2.5MB_ms": 0.062},
                    },
                    "notes": [],
                },
                {
                    "variant": {},
                    "world_size": 2,
                    "rows": [],
                    "pattern": None,
                    "teardown": [],
                    "nccl_nvls_enable": "0",
                    "nccl_tests": {
                        "path": "/x/all_reduce_perf",
                        "error": "all_reduce_perf hung at size 64 B",
                        "hung_size": 64,
                        "hung_after_s": 61.0,
                    },
                },
                {
                    "variant": {},
                    "rows": [],
                    "nccl_tests": {
                        "path": "/x/all_reduce_perf",
                        "error": "not run: it failed in an earlier variant",
                    },
                },
            ],
        }
    ],
}


def test_stored_runs_are_typed_and_written_back_key_for_key(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    document = {**OLD_ENV_JSON, **FULL_RUNS, "schema_version": records.SCHEMA_VERSION}
    (build / "env.json").write_text(json.dumps(document))
    record = records.read(build)
    failed, driver, drift = record.check_results
    assert (
        failed.failed
        and failed.details is not None
        and failed.details.to_json() == {"arch_list": ["sm_90"]}
        and driver.title == ""
        and drift.status == "warn"
    )
    assert record.baselines[0].drift is not None and record.baselines[0].drift.drifted
    assert (
        record.baseline is not None
        and record.baseline.command == ("python", "bench.py")
        and record.baseline.unit == "tok/s"
    )
    assert record.env_template == records.EnvTemplate(
        env={"FLASHINFER_CUDA_ARCH_LIST": "{arch_list}", "W": "{env}"}, nvcc="13.0"
    )
    (run,) = record.allreduce
    assert run.runs[0].rows[0].side("graph") == (8.8, 0.0, 5.87, 1.5, 2.93)
    assert run.anchor_failures() == [
        "all_reduce_perf hung at size 64 B",
        "not run: it failed in an earlier variant",
    ]
    records.write(build, record)
    assert json.loads((build / "env.json").read_text()) == document


def test_one_writer_appends_runs_and_keeps_what_is_there(tmp_path: Path) -> None:
    build = tmp_path / "build"
    records.write(build, EnvRecord(name="cu130", cuda="13.0", venv=str(build / "venv")))
    driver = CheckResult(id="driver", title="the driver", status="fail", reason="old driver", seconds=0.1)
    records.add_checks(build, [driver], "2026-11-30T08:00:00+00:00")
    run = BaselineRun(
        figure=1.5,
        unit="ms",
        better="lower",
        at="now",
        machine=MachineStamp(summary="cpu", id="1"),
        command=["true"],
        seconds=0.1,
        exit_code=0,
        output_tail="",
    )
    records.add_baseline(build, run)
    records.add_baseline(build, run)
    records.add_allreduce(build, AllreduceRun(at="now", backend="gloo", world_size=2, runs=[]))
    record = records.read(build)
    assert record.cuda == "13.0" and record.check_results == [driver]
    assert record.baselines == [run, run] and record.allreduce[0].backend == "gloo"
    assert json.loads((build / "env.json").read_text())["schema_version"] == 1
    # a build without a record
    assert records.read(tmp_path / "no-such-build") == EnvRecord(name="no-such-build")
    # an --only run is kept beside the last full run, and the next full run drops it
    drift = CheckResult(id="drift", status="warn")
    later = records.add_checks(build, [drift], "T2", only=("drift",))
    assert later.check_results[0].id == "driver" and later.checks_subset is not None
    assert later.latest_results() == {"driver": driver, "drift": drift}
    assert json.loads((build / "env.json").read_text())["checks_subset"]["only"] == ["drift"]
    assert records.add_checks(build, [], "T3").checks_subset is None
    assert "checks_subset" not in json.loads((build / "env.json").read_text())


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"checks": "all passed"}, "key 'checks' is str"),
        ({"cuda": 13.0}, "key 'cuda' is float"),
        ({"adopted": "no"}, "key 'adopted' is str"),
        ({"packages": ["torch", 3]}, "key 'packages' holds a non-string"),
        ({"env": {"CUDA_HOME": 1}}, "key 'env' holds a non-string"),
        ({"baselines": [{"figure": "fast"}]}, "key 'baselines[0].figure' is str"),
        (
            {"checks": {"results": [{"status": "pass"}]}},
            "key 'checks.results[0].id' is missing, expected a string",
        ),
        (
            {"checks": {"results": [{"id": "driver", "status": "ok"}]}},
            "key 'checks.results[0].status' is 'ok', expected one of",
        ),
        (
            {"checks": {"results": [{"id": "driver", "status": "pass", "details": []}]}},
            "key 'checks.results[0].details' is list",
        ),
        (
            {"baselines": [{"figure": 1.0, "better": "faster"}]},
            "key 'baselines[0].better' is 'faster', expected higher or lower",
        ),
        ({"baseline": {"command": "python bench.py"}}, "key 'baseline.command' is str"),
        ({"baseline": {"cwd": "."}}, "key 'baseline.command' is missing"),
        (
            {"baselines": [{"figure": 1.0, "drift": {"status": "pass", "counts": {"modified": "2"}}}]},
            "key 'baselines[0].drift.counts' holds",
        ),
        (
            {"allreduce": [{"runs": [{"variant": {}, "rows": [{"size": "8", "count": 2, "wrong": 0}]}]}]},
            "key 'allreduce[0].runs[0].rows[0].size' is str",
        ),
        (
            {
                "allreduce": [
                    {
                        "runs": [
                            {"variant": {}, "rows": [], "nccl_tests": {"path": "p", "eager": [{"size": 8}]}}
                        ]
                    }
                ]
            },
            "key 'allreduce[0].runs[0].nccl_tests.eager[0].time_us' is missing",
        ),
        ({"schema_version": 99}, "schema_version 99 is newer"),
        (
            {"env_template": {"nvcc": "13.0"}},
            "key 'env_template.env' is missing",
        ),  # a check would have met a KeyError
        ({"env_template": {"env": {"A": 1}}}, "key 'env_template.env' is not all strings"),
        ({"env_template": {"env": {}, "nvcc": 13}}, "key 'env_template.nvcc' is int"),
        # a check fills the template again: each of these was a KeyError, ValueError or IndexError out of `check`
        ({"env_template": {"env": {"A": "{bogus}"}}}, "key 'env_template.env' holds A = '{bogus}'"),
        ({"env_template": {"env": {"A": "{venv"}}}, "key 'env_template.env' holds A = '{venv'"),
        ({"env_template": {"env": {"A": "{0}"}}}, "key 'env_template.env' holds A = '{0}'"),
    ],
)
def test_a_record_of_the_wrong_type_is_an_error_naming_the_file_and_key(
    tmp_path: Path, change: dict, words: str
) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "env.json").write_text(json.dumps({**OLD_ENV_JSON, **change}))
    with pytest.raises(RecordError, match=str(build / "env.json")) as caught:
        records.read(build)
    assert words in caught.value.message and caught.value.hint
    assert caught.value.exit_code == 7


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", ""])
def test_env_json_that_is_not_an_object(tmp_path: Path, text: str) -> None:
    (tmp_path / "env.json").write_text(text)
    with pytest.raises(RecordError, match="env.json"):
        records.read(tmp_path)


def test_broken_records_through_the_cli_are_one_line_and_change_nothing(
    provision_bin: str, tmp_path: Path
) -> None:
    home = adopted_home(provision_bin, tmp_path, "one", "two")
    assert provision_run(provision_bin, "switch", "one", "--home", str(home)).returncode == 0
    env_json = next((home / "builds").glob("two-*")) / "env.json"
    good = env_json.read_text()
    env_json.write_text(json.dumps({**json.loads(good), "checks": ["not", "an", "object"]}))
    for argv in (["envs"], ["check", "two"], ["shell-env", "two"], ["compare", "two", "one"]):
        done = provision_run(provision_bin, *argv, "--home", str(home))
        lines = done.stderr.splitlines()
        assert done.returncode == 7 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert (
            lines[-2]
            == f'error: {env_json}: key \'checks\' is list ["not", "an", "object"], expected an object'
        ), argv
        assert lines[-1].startswith("hint: fix or remove that key in")
    env_json.write_text(good)
    state = home / "state.json"
    state.write_text(json.dumps({"history": "one"}))
    # set aside, rebuilt: [two, one]
    done = provision_run(provision_bin, "rollback", "--home", str(home), "--json")
    assert done.returncode == 0 and f"{state}: key 'history' is str" in done.stderr, done.stderr
    assert json.loads(done.stdout)["active"] == "two" and (home / "active").readlink() == Path("envs/two")
    assert [p.read_text() for p in home.glob("state.json.damaged-*")] == [json.dumps({"history": "one"})]


def test_state_history_is_read_from_an_old_file_and_rewritten_versioned(
    provision_bin: str, tmp_path: Path
) -> None:
    home = adopted_home(provision_bin, tmp_path, "one", "two")
    (home / "state.json").write_text(json.dumps({"history": ["two", "one"]}))  # written before schema_version
    done = provision_run(provision_bin, "switch", "two", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert json.loads((home / "state.json").read_text()) == {
        "schema_version": 1,
        "history": ["two", "one", "two"],
    }
    back = run_provision("rollback", "--home", str(home), "--json", timeout=60)
    assert json.loads(back.stdout)["active"] == "one"


def test_two_commands_storing_runs_at_once_both_keep_theirs(tmp_path: Path) -> None:
    """Eight processes append 15 all-reduce runs each to one env.json: none is lost to another's rewrite."""
    import sys

    build = tmp_path / "build"
    records.write(build, EnvRecord(name="cu130"))
    script = (
        "import sys\nfrom pathlib import Path\nfrom provision.envs import records\n"
        "from provision.records.allreduce_runs import AllreduceRun\n"
        "for i in range(15):\n"
        "    records.add_allreduce(Path(sys.argv[1]), AllreduceRun(at=sys.argv[2] + str(i), backend='gloo',"
        " world_size=2, runs=[]))\n"
    )
    writers = [subprocess.Popen([sys.executable, "-c", script, str(build), f"w{n}-"]) for n in range(8)]
    assert [w.wait(timeout=120) for w in writers] == [0] * 8
    assert sorted(run.at for run in records.read(build).allreduce) == sorted(
        f"w{n}-{i}" for n in range(8) for i in range(15)
    )
