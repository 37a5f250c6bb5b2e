"""Several ranks, for real where this machine allows: the launcher, the all-reduce sweep and its formulas with gloo on
CPUs (torch's CPU build lies on this machine's disk), NVLS refused, a hanging rank killed with a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import once_per_run
from cuobjdump import CACHE
from launch import run_provision

from provision.checks import allreduce, payload_dir
from provision.errors import InputError, ProvisionError, UsageError
from provision.stacks import uvtool

CPU_TORCH = sorted(
    Path("/opt/wheels").glob(f"torch-*+cpu-cp{sys.version_info[0]}{sys.version_info[1]}-*.whl")
)


@pytest.mark.parametrize(
    ("text", "size"), [("8", 8), ("42K", 43008), ("2.5M", 2621440), ("128M", 134217728), ("1G", 2**30)]
)
def test_sizes(text: str, size: int) -> None:
    assert allreduce.parse_size(text) == size


def test_variants_and_nvls_is_refused() -> None:
    assert allreduce.variants((), ()) == [{}]
    assert allreduce.variants(("allreduce:ring", "allreduce:tree"), ("Simple",)) == [
        {"NCCL_ALGO": "allreduce:ring", "NCCL_PROTO": "Simple"},
        {"NCCL_ALGO": "allreduce:tree", "NCCL_PROTO": "Simple"},
    ]
    for algo in ("NVLS", "allreduce:nvlstree", "^ring,NVLS"):
        with pytest.raises(UsageError, match="never enables"):
            allreduce.variants((algo,), ())


def test_a_hanging_rank_is_killed_with_a_verdict(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(payload_dir())!r})\n"
        "from _common import launch, write_rank\n"
        "def target(rank, world, out_dir, config):\n"
        "    if rank == 1:\n"
        "        time.sleep(600)\n"
        "    write_rank(out_dir, rank, {'rank': rank, 'ok': True})\n"
        "if __name__ == '__main__':\n"
        "    launch(target, 3, {}, 3.0)\n"
        "    print('not reached')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(own_tmp(tmp_path))},
    )
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "fail" and "ranks [1] hung for 3 s and were killed" in verdict["reason"]
    assert "ACS" in verdict["reason"] and "not reached" not in done.stdout
    assert not any(own_tmp(tmp_path).iterdir()), "the ranks' folder outlived the verdict"


def own_tmp(tmp_path: Path) -> Path:
    """The launcher's TMPDIR: its ranks' folder is made there (and must be gone when it ends)."""
    folder = tmp_path / "tmp"
    folder.mkdir(exist_ok=True)
    return folder


def run_launcher(tmp_path: Path, body: str, call: str) -> tuple[dict[str, object], float]:
    script = tmp_path / "ranks.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(payload_dir())!r})\n"
        "from _common import emit, launch, progress, write_rank\n"
        "def target(rank, world, out_dir, config):\n" + body + "if __name__ == '__main__':\n"
        f"    results = {call}\n"
        "    emit('pass', 'done', ranks=results)\n"
    )
    begin = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(own_tmp(tmp_path))},
    )
    seconds = time.monotonic() - begin
    assert not any(own_tmp(tmp_path).iterdir()), "the ranks' folder outlived the verdict"
    return json.loads(done.stdout.strip().splitlines()[-1]), seconds


def test_a_rank_stuck_in_a_step_is_found_by_its_own_bound_not_the_run_timeout(tmp_path: Path) -> None:
    body = (
        "    progress(out_dir, rank, 'size 4096 B', 0.5 if rank == 1 else 60)\n"
        "    time.sleep(600 if rank == 1 else 0.1)\n"
        "    write_rank(out_dir, rank, {'rank': rank, 'ok': True})\n"
    )
    verdict, seconds = run_launcher(tmp_path, body, "launch(target, 2, {}, 600.0)")
    assert verdict["status"] == "fail" and verdict["details"]["hung_rank"] == 1
    assert "rank 1 hung at size 4096 B" in verdict["reason"] and "ACS" in verdict["reason"]
    assert seconds < 120  # found from the step's bound, not after the 600 s run timeout


def test_results_are_kept_when_a_teardown_hangs(tmp_path: Path) -> None:
    body = (
        "    write_rank(out_dir, rank, {'rank': rank, 'ok': True, 'figure': rank * 10})\n"
        "    if rank == 0:\n"
        "        time.sleep(600)  # a teardown that never returns, like NCCL's with graphs alive\n"
    )
    verdict, seconds = run_launcher(tmp_path, body, "launch(target, 2, {}, 600.0, grace=1.0)")
    ranks = verdict["details"]["ranks"]
    assert verdict["status"] == "pass" and [r["figure"] for r in ranks] == [0, 10]
    assert ranks[0]["teardown"]["clean"] is False and "killed" in ranks[0]["teardown"]["note"]
    assert "teardown" not in ranks[1] and seconds < 120  # the 1 s grace, not the 600 s run timeout


def test_payload_processes_never_enable_multicast(tmp_path: Path) -> None:
    script = tmp_path / "env.py"
    script.write_text(
        f"import os, sys\nsys.path.insert(0, {str(payload_dir())!r})\nimport _common\n"
        "print(os.environ['NCCL_NVLS_ENABLE'], os.environ['TORCH_SYMM_MEM_DISABLE_MULTICAST'])\n"
    )
    env = {**os.environ, "NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["0", "1"]


def cpu_torch_venv(venv: Path) -> Path:
    """A venv at `venv` with torch's CPU build from this machine's disk; its Python."""
    # uv unpacks the 700 MB wheel once per machine, not once per run (14 s of CPU): a uv cache of the tests' cache of
    # real wheels (tests/cuobjdump.py), which only this install uses
    uv = {**os.environ, "UV_CACHE_DIR": str(CACHE / "uv-torch-cpu")}
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"], env=uv)
    uvtool.run(
        ["pip", "install", "--python", str(venv / "bin/python"), "--quiet", str(CPU_TORCH[-1])], env=uv
    )
    return venv / "bin/python"


@dataclass(frozen=True)
class GlooRuns:
    home: Path
    sweep: subprocess.CompletedProcess[str]  # --json, 3 ranks, 8 B to 64 KiB
    table: subprocess.CompletedProcess[str]  # the table, 2 ranks, 16 B
    seen: Path  # what each rank's interpreter was given of the secret settings, one line per interpreter


@pytest.fixture(scope="module")
def gloo_runs(tmp_path_factory: pytest.TempPathFactory, shared_uv_cache: Path) -> GlooRuns:
    """Two real sweeps with gloo on CPUs in an environment with torch's CPU build, shared by the tests below (each starts
    a rank per CPU, torch imported in each), run with secret --nccl-env settings; a .pth file in the environment under
    test writes what every rank was given. Made once per run: test processes side by side wait for the first."""
    if not CPU_TORCH:
        pytest.skip("no CPU build of torch on this machine's disk")
    with once_per_run(tmp_path_factory, "gloo") as (base, fill):
        seen, home, venv = base / "seen", ["--home", str(base / "home")], base / "cpu-torch" / "venv"
        if fill:
            cpu_torch_venv(venv)
            # torch's bytecode compiled once, as a user's first import does, not by the three ranks of the first sweep
            # each on its own (adopt reads torch's CUDA release from its version.py: it imports no torch)
            subprocess.run([venv / "bin/python", "-c", "import torch"], check=True, timeout=600)
            probe = next(venv.glob("lib/python3*/site-packages")) / "zz_provision_test_env.pth"
            probe.write_text(
                f"import os; (os.environ.get('NCCL_PROXY_TOKEN') and open({str(seen)!r}, 'a').write("
                "os.environ['NCCL_PROXY_TOKEN'] + ' ' + os.environ['NCCL_NET_PLUGIN_CONFIG'] + '\\n'))\n"
            )
            settings = [word for name, value in SECRETS.items() for word in ("--nccl-env", f"{name}={value}")]
            bench = ["bench", "allreduce", "cpu", "--backend", "gloo", *settings, *home]
            try:
                run_provision("adopt", "cpu", venv, "--no-lock", *home, check=True)
                sweep = run_provision(
                    *bench, "--ranks", "3", "-e", "64K", "--iters", "4", "--json", timeout=600, check=True
                )
                table = run_provision(
                    *bench, "--ranks", "2", "-e", "16", "--iters", "1", timeout=600, check=True
                )
            finally:
                probe.unlink()
            (base / "runs.json").write_text(
                json.dumps(
                    {name: [done.stdout, done.stderr] for name, done in (("sweep", sweep), ("table", table))}
                )
            )
        runs = {
            name: subprocess.CompletedProcess([], 0, out, err)
            for name, (out, err) in json.loads((base / "runs.json").read_text()).items()
        }
    return GlooRuns(base / "home", runs["sweep"], runs["table"], seen)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first installs torch (a cold uv cache) before two sweeps
def test_gloo_sweep_on_cpus_and_stored_with_the_environment(gloo_runs: GlooRuns) -> None:
    (run,) = json.loads(gloo_runs.sweep.stdout)["runs"]
    rows = run["rows"]
    assert [r["size"] for r in rows] == [8 * 2**i for i in range(14)]
    assert all(r["wrong"] == 0 for r in rows)
    for row in rows:  # nccl-tests' formulas: algbw = bytes / time, busbw = algbw * 2(n-1)/n
        assert row["eager_algbw"] == pytest.approx(row["size"] / (row["eager_us"] * 1e-6) / 1e9)
        assert row["eager_busbw"] == pytest.approx(row["eager_algbw"] * 2 * 2 / 3)
    envs = json.loads(run_provision("envs", "--json", "--home", gloo_runs.home).stdout)
    meta = json.loads((Path(envs["environments"][0]["path"]) / "env.json").read_text())
    assert [r["world_size"] for r in meta["allreduce"]] == [3, 2]
    assert "busbw" in gloo_runs.table.stdout and "#wrong" in gloo_runs.table.stdout


def test_nccl_tests_output_is_read_and_joined_beside_provision_rows(tmp_path: Path) -> None:
    from conftest import DATA

    from provision.checks import nccl_tests

    # 2 x H200, 2026-11-30
    version, rows = nccl_tests.parse((DATA / "nccl-tests-h200-x2-graph-G20.txt").read_text())
    assert version == "2.28.3" and len(rows) == 25
    assert (rows[0].size, rows[0].time_us, rows[-1].busbw) == (8, 5.87, 285.81)  # the in-place columns
    from provision.records.allreduce_runs import AllreduceRow, NcclTestsFigures

    mine = [
        AllreduceRow(size=size, count=size // 4, wrong=0, graph_us=us)
        for size, us in ((8, 8.8), (134217728, 480.0), (3, 1.0))
    ]
    anchor = NcclTestsFigures(path="all_reduce_perf", nccl_library=version, eager=[], graph=rows, pattern={})
    small, large, odd = nccl_tests.join(mine, anchor)
    assert small.graph_ratio == pytest.approx(8.8 / 5.87) and small.torch_overhead_graph_us == pytest.approx(
        8.8 - 5.87
    )
    assert large.nccl_tests_graph_busbw == 285.81 and odd.graph_ratio is None and small.eager_ratio is None
    assert small.to_dict()["nccl_tests_graph_us"] == 5.87 and "eager_ratio" not in small.to_dict()


def test_nccl_tests_path_that_is_not_the_binary_is_an_input_error(tmp_path: Path) -> None:
    from provision.checks import nccl_tests

    with pytest.raises(InputError, match="no executable all_reduce_perf"):
        nccl_tests.find(tmp_path)
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert nccl_tests.find(tmp_path) == binary


def test_an_all_reduce_perf_that_prints_garbage_is_an_env_error_not_a_traceback(tmp_path: Path) -> None:
    """A binary named all_reduce_perf that is not nccl-tests, or a build whose output differs: a line of 13 fields that
    are not numbers, a version that is not one. Its real rows still count; without any, one EnvError line."""
    from conftest import DATA

    from provision.checks import nccl_tests
    from provision.errors import EnvError

    binary = tmp_path / "all_reduce_perf"
    garbage = "# nccl-tests nccl-library=\\n# nccl-library=abc\\n" + "1 a b c d e f g h i j k l\\n" * 3
    binary.write_text(f"#!/bin/sh\nprintf '{garbage}'\n")
    binary.chmod(0o755)
    with pytest.raises(EnvError, match="nccl-tests failed"):
        nccl_tests.run(
            binary,
            world=2,
            min_bytes=8,
            max_bytes=8,
            factor=2,
            iters=1,
            graph_launches=0,
            env=dict(os.environ),
        )
    real = (DATA / "nccl-tests-h200-x2-graph-G20.txt").read_text()
    binary.write_text(f"#!/bin/sh\nprintf '{garbage}'\ncat {DATA / 'nccl-tests-h200-x2-graph-G20.txt'}\n")
    version, rows = nccl_tests.run(
        binary, world=2, min_bytes=8, max_bytes=8, factor=2, iters=1, graph_launches=0, env=dict(os.environ)
    )
    assert (version, len(rows)) == ("2.28.3", 25) and rows == nccl_tests.parse(real)[1]


def test_nccl_env_takes_nccl_variables_only_and_never_nvls() -> None:
    assert allreduce.nccl_env(("NCCL_GRAPH_MIXING_SUPPORT=0", "NCCL_PROTO=Simple")) == {
        "NCCL_GRAPH_MIXING_SUPPORT": "0",
        "NCCL_PROTO": "Simple",
    }
    for bad in (
        "NCCL_NVLS_ENABLE=1",
        "NCCL_ALGO=NVLS",
        "LD_PRELOAD=/x.so",
        "NCCL_GRAPH_MIXING_SUPPORT",
        "NCCL X=1",
    ):
        with pytest.raises(UsageError):
            allreduce.nccl_env((bad,))


def test_the_graph_mixing_note_follows_the_measured_ratio() -> None:
    from provision.records.allreduce_runs import AllreduceRow

    slow = [
        AllreduceRow(size=size, count=size // 4, wrong=0, graph_ratio=ratio)
        for size, ratio in ((8, 1.6), (65536, 1.4), (2**27, 1.0))
    ]
    assert "NCCL_GRAPH_MIXING_SUPPORT=0" in allreduce.notes_for(slow, {})[0]
    assert allreduce.notes_for(slow, {"NCCL_GRAPH_MIXING_SUPPORT": "0"}) == []
    assert allreduce.notes_for([AllreduceRow(size=8, count=2, wrong=0, graph_ratio=1.05)], {}) == []


def test_a_sweep_that_would_never_end_is_refused_before_anything_runs(
    tmp_path: Path, provision_bin: str
) -> None:
    """-f 1 (or 0) never reaches the largest size: the payload's size list grew until memory ran out. --iters 0,
    --ranks 0 and a smallest size above the largest are no sweep either. Each is exit 2 before any process starts."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "bare", str(venv), "--no-lock", *home, check=True)
    for bad, word in (
        (["-f", "1"], "--factor"),
        (["-f", "0"], "--factor"),
        (["--iters", "0"], "--iters"),
        (["--ranks", "0"], "--ranks"),
        (["-b", "1M", "-e", "8"], "larger than --max-bytes"),
    ):
        done = run_provision("bench", "allreduce", "bare", "--backend", "gloo", *bad, *home, timeout=60)
        assert done.returncode == 2 and word in done.stderr and len(done.stderr.strip().splitlines()) == 2, (
            bad,
            done.stderr,
        )


def test_ranks_die_with_their_launcher_on_kill_9(tmp_path: Path) -> None:
    """kill -9 of the payload (which dies with provision) must not leave ranks running on the GPUs."""
    import signal

    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "ranks.py"
    script.write_text(
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(payload_dir())!r})\n"
        "from _common import launch\n"
        "def target(rank, world, out_dir, config):\n"
        f"    open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
        "    time.sleep(600)\n"
        "if __name__ == '__main__':\n"
        "    launch(target, 2, {}, 600.0)\n"
    )
    # kill -9: no cleanup
    launcher = subprocess.Popen(
        [sys.executable, str(script)], env={**os.environ, "TMPDIR": str(own_tmp(tmp_path))}
    )
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    ranks = [int(p.name) for p in pids.iterdir()]
    assert len(ranks) == 2
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()

    def running(pid: int) -> bool:  # a zombie waiting for init to reap it is dead
        stat = Path(f"/proc/{pid}/stat")
        return stat.exists() and stat.read_text().split()[2] != "Z"

    deadline = time.monotonic() + 10
    while any(running(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in ranks if running(pid)] == []


def test_nccl_tests_with_gloo_is_refused_before_anything_runs(tmp_path: Path, provision_bin: str) -> None:
    """--nccl-tests runs NVIDIA's all_reduce_perf on GPUs; with --backend gloo it was silently ignored. It is a usage
    error naming both options, before any process starts (the binary below would leave a mark, the bare venv crash)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "bare", str(venv), "--no-lock", *home, check=True)
    binary, mark = tmp_path / "all_reduce_perf", tmp_path / "ran"
    binary.write_text(f"#!/bin/sh\ntouch {mark}\n")
    binary.chmod(0o755)
    for where in (binary, tmp_path):  # the binary, or the folder holding it
        done = run_provision(
            "bench", "allreduce", "bare", "--backend", "gloo", "--nccl-tests", str(where), *home, timeout=60
        )
        error, hint = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "--nccl-tests" in error and "--backend gloo" in error, done.stderr
        assert hint.startswith("hint:") and "--backend nccl" in hint
    assert not mark.exists()


def test_what_the_command_line_alone_refuses_is_a_usage_error_before_any_environment(
    tmp_path: Path, provision_bin: str
) -> None:
    """NVLS and a --nccl-tests path without all_reduce_perf are exit 2 (docs/exit-codes.md) even with no environment
    active and no GPU: they were exit 7 ("no environment is active") before."""
    home = ["--home", str(tmp_path / "home")]
    for extra, words in (
        (["--nccl-algo", "NVLS"], "NVLS uses multicast"),
        (["--nccl-tests", str(tmp_path)], "no executable all_reduce_perf"),
    ):
        done = run_provision("bench", "allreduce", *extra, *home, timeout=60)
        assert done.returncode == 2 and words in done.stderr, (extra, done.returncode, done.stderr)


SECRETS = {
    "NCCL_NET_PLUGIN_CONFIG": "https://ops:hunter2pw@plugins.example/net.json",
    "NCCL_PROXY_TOKEN": "tok-5f3a9c1e",
    "NCCL_NET_OPTS": "host=a.example,token=zz-71q,mode=ib",
}


def test_a_refused_nccl_env_never_prints_its_value() -> None:
    """`--nccl-env AWS_SECRET_TOKEN=...` (not an NCCL variable) was refused with the whole pair in the message."""
    for pair in ("AWS_SECRET_TOKEN=tok-5f3a9c1e", "NCCL PROXY=https://ops:hunter2pw@h/"):
        with pytest.raises(UsageError) as caught:
            allreduce.nccl_env((pair,))
        assert "tok-5f3a9c1e" not in caught.value.message and "hunter2pw" not in caught.value.message
        assert pair.partition("=")[0] in caught.value.message


def test_nccl_env_secrets_are_redacted_where_shown_and_stored_never_where_passed() -> None:
    shown = allreduce.shown_settings({**SECRETS, "NCCL_IB_HCA": "mlx5_0:1", "NCCL_SOCKET_IFNAME": "ops@eth0"})
    assert shown == {
        "NCCL_NET_PLUGIN_CONFIG": "https://****@plugins.example/net.json",
        "NCCL_PROXY_TOKEN": "****",
        "NCCL_NET_OPTS": "host=a.example,token=****,mode=ib",
        "NCCL_IB_HCA": "mlx5_0:1",
        "NCCL_SOCKET_IFNAME": "****@eth0",
    }
    assert allreduce.scrub("NCCL INFO NCCL_PROXY_TOKEN set by environment to tok-5f3a9c1e", SECRETS) == (
        "NCCL INFO NCCL_PROXY_TOKEN set by environment to ****"
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first installs torch (a cold uv cache) before two sweeps
def test_nccl_env_secrets_stay_out_of_env_json_and_json_but_reach_the_ranks(gloo_runs: GlooRuns) -> None:
    """--nccl-env values were stored and printed as given; a URL's password or a TOKEN's value is now **** in
    env.json, --json and the table, while every rank still runs with the real value."""
    (run,) = json.loads(gloo_runs.sweep.stdout)["runs"]
    assert (
        run["variant"]["NCCL_PROXY_TOKEN"] == "****"
        and "https://****@plugins.example" in gloo_runs.table.stdout
    )
    envs = json.loads(run_provision("envs", "--json", "--home", gloo_runs.home).stdout)
    stored = (Path(envs["environments"][0]["path"]) / "env.json").read_text()
    for text in (
        stored,
        gloo_runs.sweep.stdout,
        gloo_runs.sweep.stderr,
        gloo_runs.table.stdout,
        gloo_runs.table.stderr,
    ):
        for secret in ("hunter2pw", "tok-5f3a9c1e", "zz-71q"):
            assert secret not in text
    assert {line for line in gloo_runs.seen.read_text().splitlines()} == {
        f"{SECRETS['NCCL_PROXY_TOKEN']} {SECRETS['NCCL_NET_PLUGIN_CONFIG']}"
    }


def fake_all_reduce_perf(tmp_path: Path, rows: int) -> tuple[Path, Path]:
    """A real executable in all_reduce_perf's place: the header and the first `rows` rows of a real 2 x H200 run,
    printed with the buffering a C program's stdio has (held back in a pipe, written per line to a terminal); then it
    starts a helper and both sleep for an hour, as a hung NCCL would. The pids go to the second path."""
    from conftest import DATA

    binary, pids = tmp_path / "all_reduce_perf", tmp_path / "pids"
    binary.write_text(
        f"#!{sys.executable}\n"
        "import os, subprocess, time\n"
        f"lines = open({str(DATA / 'nccl-tests-h200-x2-graph-G20.txt')!r}).read().splitlines()\n"
        "header = [line for line in lines[:12] if line.startswith('#')]\n"
        "rows = [line for line in lines if line.strip() and not line.startswith('#')]\n"
        "out = open(1, 'w', buffering=1 if os.isatty(1) else 8192, closefd=False)  # glibc's stdio: line or block\n"
        f"for line in header + rows[:{rows}]:\n"
        "    print(line, file=out)\n"
        "helper = subprocess.Popen(['sleep', '3600'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{helper.pid}}')\n"
        "time.sleep(3600)\n"
    )
    binary.chmod(0o755)
    return binary, pids


def running(pid: int) -> bool:
    """Whether pid runs (a zombie waiting for init to reap it is dead)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def gone(pids: Path) -> bool:
    deadline = time.monotonic() + 10
    while any(running(int(pid)) for pid in pids.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(running(int(pid)) for pid in pids.read_text().split())


SWEEP = {"world": 2, "min_bytes": 8, "max_bytes": 2**27, "factor": 2, "iters": 20}


def test_a_hung_all_reduce_perf_is_killed_at_the_size_it_hung_on(tmp_path: Path) -> None:
    """all_reduce_perf ran under a flat 600 s timeout, then said "exit -1". Its rows are now read as they come: the
    11th size (8192 B) not coming within its bound (the ranks' formula, with a 1 s allowance here instead of 60 s)
    kills it and its helper, and names the size, the time and the ACS/IOMMU/P2P hint."""
    from provision.checks import nccl_tests

    binary, pids = fake_all_reduce_perf(tmp_path, rows=10)
    begin = time.monotonic()
    with pytest.raises(nccl_tests.Hung) as caught:
        nccl_tests.run(binary, **SWEEP, graph_launches=0, env=dict(os.environ), start_s=3.0, allowance_s=1.0)
    assert time.monotonic() - begin < 60  # not the hour it sleeps
    # its 1 s bound, read late on a loaded machine
    assert caught.value.size == 8192 and 1.0 <= caught.value.waited_s < 30
    assert caught.value.message.startswith("all_reduce_perf hung at size 8192 B after 1 s and was killed")
    assert (
        "ACS" in caught.value.hint
        and "IOMMU" in caught.value.hint
        and "NCCL_P2P_DISABLE=1" in caught.value.hint
    )
    assert gone(pids)


def test_an_all_reduce_perf_stuck_after_its_last_row_keeps_its_rows(tmp_path: Path) -> None:
    from provision.checks import nccl_tests

    binary, pids = fake_all_reduce_perf(tmp_path, rows=25)
    version, rows = nccl_tests.run(
        binary, **SWEEP, graph_launches=0, env=dict(os.environ), start_s=3.0, allowance_s=1.0
    )
    assert version == "2.28.3" and [row.size for row in rows] == nccl_tests.sizes(8, 2**27, 2)
    assert gone(pids)


def test_an_all_reduce_perf_that_exits_while_its_helper_holds_the_terminal_is_a_failure_not_a_hang(
    tmp_path: Path,
) -> None:
    """It printed 3 rows and exited 3, leaving a helper with the terminal open: that is its failure, said at once,
    not a hang found at the next size's bound (60 s and more on a GPU)."""
    from provision.checks import nccl_tests

    binary, pids = fake_all_reduce_perf(tmp_path, rows=3)
    text = binary.read_text().replace("time.sleep(3600)\n", "os._exit(3)\n")
    binary.write_text(text)
    begin = time.monotonic()
    with pytest.raises(ProvisionError) as caught:
        nccl_tests.run(
            binary, **SWEEP, graph_launches=0, env=dict(os.environ), start_s=120.0, allowance_s=120.0
        )
    assert not isinstance(caught.value, nccl_tests.Hung) and "exit 3" in caught.value.message
    assert time.monotonic() - begin < 60 and gone(pids)  # at once, not at the next size's 120 s bound


def test_provision_figures_are_kept_beside_a_hung_all_reduce_perf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hang is one line in the run's nccl_tests.error; provision's own rows stay as measured, the table says it,
    and the command exits 1 (anchor_failures)."""
    from provision.records.allreduce_runs import AllreduceRow, AllreduceRun, NcclTestsFailure, VariantRun
    from provision.views import checks as check_views
    from provision.views.render import render

    binary, pids = fake_all_reduce_perf(tmp_path, rows=3)
    rows = [AllreduceRow(size=8, count=2, wrong=0, eager_us=20.0, eager_busbw=0.0)]
    measured = allreduce.beside_nccl_tests(
        VariantRun(variant={}, rows=rows),
        {},
        binary,
        venv=tmp_path,
        env=dict(os.environ),
        **SWEEP,
        start_s=3.0,
        allowance_s=1.0,
    )
    assert gone(pids) and measured.rows == rows
    anchor = measured.nccl_tests
    assert (
        isinstance(anchor, NcclTestsFailure)
        and anchor.hung_size == 64
        and 1.0 <= (anchor.hung_after_s or 0) < 30
    )
    assert (
        anchor.error.startswith(
            "all_reduce_perf hung at size 64 B after 1 s and was killed; provision's own "
            "figures are kept: check peer-to-peer"
        )
        and "\n" not in anchor.error
    )
    run = AllreduceRun(at="now", backend="nccl", world_size=2, runs=[measured])
    assert run.anchor_failures() == [anchor.error]
    shown = check_views.allreduce("h200", run)
    assert (
        shown.exit_code == 1
        and shown.document is not None
        and shown.document["runs"][0]["nccl_tests"]["hung_size"] == 64
    )
    assert render(shown, "table") == 1
    table = capsys.readouterr().out
    assert f"# nccl-tests {binary}: all_reduce_perf hung at size 64 B" in table and "20.00" in table


def test_a_secret_of_nccl_env_never_reaches_the_verbose_log(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-v prints a failed child's stderr; NCCL_DEBUG=INFO echoes every NCCL variable, secrets included."""
    from provision import log

    monkeypatch.setattr(log, "_hidden", {})
    monkeypatch.setattr(log, "_level", log.VERBOSE)
    allreduce.hide_secrets({"NCCL_PROXY_TOKEN": "tok-5f3a9c1e", "NCCL_IB_HCA": "mlx5_0:1"})
    log.debug(
        "rank 0 exited with code 1; its stderr:\nNCCL INFO NCCL_PROXY_TOKEN set by environment to tok-5f3a9c1e"
    )
    log.info("... NCCL_IB_HCA=mlx5_0:1 tok-5f3a9c1e")
    err = capsys.readouterr().err
    assert "tok-5f3a9c1e" not in err and "to ****" in err and "mlx5_0:1" in err
