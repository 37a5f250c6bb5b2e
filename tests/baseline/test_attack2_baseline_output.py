"""A profile's baseline command that prints enormously (a benchmark's debug output, a loop gone wrong): provision read
all of it into memory, three times its size (1 GB printed: 3.1 GB resident; a few GB printed took the machine's memory).
Now only the last 8 M characters of each stream are held: the figure, printed last, is still found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tiny
from launch import argv, environment

pytestmark = pytest.mark.timeout(300)
PRINTED = 160 << 20
PEAK = 256 << 20  # interpreter and all; read whole, 160 MiB of output took about three times that
PEAK_PROBE = """import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=240)
print(json.dumps([done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, done.stdout, done.stderr]))"""


def test_a_baseline_printing_hundreds_of_megabytes_is_read_in_bounded_memory(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    code = f"import os\nb = b'y' * (1 << 20) + b'\\n'\nfor _ in range({PRINTED >> 20}): os.write(1, b)\nprint('decode 5.5 tok/s')"
    tiny.profile(
        tool.profiles,
        "loud",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\n'
            "pattern = 'decode ([0-9.]+) tok/s'\nunit = \"tok/s\"\ntimeout = 200\n"
        ),
    )
    tool.create("loud", "--no-checks")
    probe = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, *argv(("baseline", "loud", "--json"))],
        capture_output=True,
        text=True,
        timeout=280,
        env=environment(tool.env()),
    )
    code_, peak, stdout, stderr = json.loads(probe.stdout)
    assert code_ == 0, stderr[-2000:]
    assert json.loads(stdout)["figure"] == 5.5
    assert peak < PEAK, f"baseline took {peak >> 20} MiB to read {PRINTED >> 20} MiB of output"


def test_a_kept_run_past_its_deadline_is_stopped_with_what_it_printed() -> None:
    import time

    from provision import proc

    started = time.monotonic()
    done = proc.run(
        [
            sys.executable,
            "-c",
            "import sys, time; print('x' * 5000 + 'tail'); sys.stdout.flush(); time.sleep(60)",
        ],
        timeout=1,
        keep=100,
    )
    assert done.timed_out and done.stdout.endswith("tail\n") and len(done.stdout) == 100
    assert time.monotonic() - started < 30


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            # killed, not yet reaped by its new parent
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_baseline_past_its_timeout_takes_what_it_started_with_it(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """A baseline whose command starts workers (torchrun, a shell running the benchmark) and hangs: at the timeout only
    the command itself was killed, and its workers ran on for ever holding the GPUs (and provision waited on the
    pipes they held). Now the command leads a process group of its own, and the whole group is killed."""
    import time

    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    pidfile = tmp_path / "worker.pid"
    code = f"sleep 120 & echo $! > {pidfile}; wait"
    tiny.profile(
        tool.profiles,
        "hung",
        extra=(
            f'[baseline]\ncommand = ["sh", "-c", {json.dumps(code)}]\n'
            "pattern = 'decode ([0-9.]+) tok/s'\ntimeout = 2\n"
        ),
    )
    tool.create("hung", "--no-checks")
    started = time.monotonic()
    done = tool("baseline", "hung", check=False)
    worker = int(pidfile.read_text())
    try:
        assert done.returncode == 7 and "the baseline failed (timed out)" in done.stderr, done.stderr
        assert time.monotonic() - started < 60
        deadline = time.monotonic() + 10
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker), "the baseline's worker outlived its timeout"
    finally:
        if not _gone(worker):
            os.kill(worker, 9)


def test_a_huge_printed_document_is_not_kept_in_env_json(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """A baseline printing its figure in a JSON document of megabytes (every request's latency): env.json kept the
    document whole with every run (3 MB a run here), and every command listing environments read it. Now the figure
    is kept, and a document over 64 K characters is `details: null`."""
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    code = "import json; print(json.dumps({'tok_s': 5.5, 'latencies': [0.00125] * 400000}))"
    tiny.profile(
        tool.profiles,
        "latencies",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\n'
            'json_key = "tok_s"\nunit = "tok/s"\ntimeout = 60\n'
        ),
    )
    tool.create("latencies")
    ran = json.loads(tool("baseline", "latencies", "--runs", "2", "--json").stdout)
    assert ran["figures"] == [5.5, 5.5] and ran["details"] is None
    env_json = Path(tool.envs()["latencies"]["path"]) / "env.json"
    assert env_json.stat().st_size < 256 << 10, f"env.json is {env_json.stat().st_size >> 10} KiB"


def test_a_figure_beside_a_deeply_nested_document_is_kept(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """`{"tok_s": 1.5, "x": [[[...]]]}` nested 600 deep: the figure was read, then keeping the document beside it
    recursed past Python's limit (`internal error: RecursionError`, exit 3, the run lost). Now the run is stored with
    the figure and `details: null`."""
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    code = "print('{\"tok_s\": 1.5, \"x\": ' + '[' * 600 + ']' * 600 + '}')"
    tiny.profile(
        tool.profiles,
        "nested",
        extra=(
            f'[baseline]\ncommand = ["python", "-c", {json.dumps(code)}]\njson_key = "tok_s"\ntimeout = 60\n'
        ),
    )
    tool.create("nested")
    done = tool("baseline", "nested", "--json", check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    ran = json.loads(done.stdout)
    assert ran["figure"] == 1.5 and ran["details"] is None
