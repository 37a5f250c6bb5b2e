"""The sglang-serve check through the real runner and a real payload process in a real venv, against a stand-in for
SGLang's server that behaves as SGLang's does where the check looks (tests/fakes/sglang_launch_server.py: it starts
slowly, answers, dies, hangs, answers short, reports a KV-canary violation). The real server ran on the SGLang stack
in the network tier's flag test; docs/evidence/ says what could not run on a GPU machine."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from wheelhouse import build_wheel

from provision.checks import dummy_model, runner
from provision.envs.records import EnvRecord
from provision.machine import nvmlstart
from provision.machine.facts import Driver, Gpu
from provision.records.results import CheckResult
from provision.stacks import uvtool

FAKES = Path(__file__).parent.parent / "fakes"
H200 = [Gpu(index=i, name="Fake H200", compute_capability="9.0", sm="sm_90") for i in range(2)]


def make_env(tmp: Path, *, mock: bool) -> Path:
    wheels = tmp / "wheels"
    build_wheel(wheels, "torch", "2.14.1+cu130", files={"torch/__init__.py": b""})
    files = {
        "sglang/__init__.py": b"",
        "sglang/launch_server.py": (FAKES / "sglang_launch_server.py").read_bytes(),
    }
    if mock:
        files["sglang/srt/kv_canary/token_oracle/__init__.py"] = b""
    build_wheel(wheels, "sglang", "0.5.23", files=files)
    build = tmp / "env"
    uvtool.run(["venv", str(build / "venv"), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(build / "venv/bin/python"),
            "--no-index",
            "--find-links",
            str(wheels),
            "--quiet",
            "torch",
            "sglang",
        ]
    )
    return build


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env(tmp_path_factory.mktemp("serve"), mock=True)


def serve(
    build: Path, tmp: Path, mode: str, gpus: list[Gpu] = H200, **variables: str
) -> tuple[CheckResult, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    trace = tmp / "trace.json"
    meta = EnvRecord(
        name="env",
        cuda="13.0",
        env={"FAKE_SGLANG": mode, "FAKE_SGLANG_TRACE": str(trace), **variables},
        packages=["sglang"],
        venv=str(build / "venv"),
    )
    (result,) = runner.run(
        build, meta, only=("sglang-serve",), gpus=gpus, driver=Driver(cuda="13.0", nvml=nvmlstart.OK)
    )
    return result, json.loads(trace.read_text()) if trace.exists() else {}


def gone(pids: list[int]) -> bool:
    """Every pid has exited (a zombie of ours aside: reaped when the test process waits, never by the server)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_it_serves_counts_the_answers_and_stops_the_whole_group(env: Path, tmp_path: Path) -> None:
    result, trace = serve(env, tmp_path, "ok")
    assert result.status == "pass", result
    assert "3 requests x 8 tokens at TP 2" in result.reason and "mock mode" in result.reason
    argv = trace["argv"]
    model = Path(argv[argv.index("--model-path") + 1])
    assert (
        model == env / "dummy-model" and json.loads((model / "config.json").read_text()) == dummy_model.CONFIG
    )
    assert argv[argv.index("--load-format") + 1] == "dummy" and "--skip-tokenizer-init" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--tp-size") + 1] == "2"
    assert (
        argv[argv.index("--sampling-backend") + 1] == "token_oracle"
        and argv[argv.index("--kv-canary") + 1] == "raise"
    )
    assert trace["env"]["SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"] == "1"
    assert gone(trace["workers"])  # the server and the worker it started
    details = result.details.to_json()
    assert details["output_tokens"] == [8, 8, 8] and Path(details["log"]).is_file()
    assert "fired up" in Path(details["log"]).read_text()


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("dies", "exited with code 1 before it answered"),
        ("short", "asked for 8 tokens a request, got [7, 7, 7]"),
        ("canary", "KV-cache canary reported a violation"),
    ],
)
def test_a_server_that_fails_is_a_fail_with_its_log(env: Path, tmp_path: Path, mode: str, words: str) -> None:
    result, trace = serve(env, tmp_path, mode)
    assert result.status == "fail" and words in result.reason, result
    assert gone(trace["workers"])
    if mode == "dies":
        assert "KeyError: 12" in (result.output_tail or "") + json.dumps(result.details.to_json())


def test_a_server_that_never_answers_is_stopped_within_the_bound(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVISION_CHECK_TIMEOUT", "8")
    start = time.monotonic()
    result, trace = serve(env, tmp_path, "hangs")
    assert result.status in ("fail", "error") and "did not answer /health within 4.8 s" in result.reason, (
        result
    )
    assert time.monotonic() - start < 30 and gone(trace["workers"])


def test_the_checks_timeout_stops_the_server_too(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner kills the payload's process group at the check's bound: the server and its workers are in it."""
    monkeypatch.setenv("PROVISION_CHECK_TIMEOUT", "3")
    monkeypatch.setattr(
        runner,
        "_serve_arguments",
        lambda build, gpus, timeout: {
            "model_path": str(dummy_model.write(build / "dummy-model")),
            "log_dir": str(build / "logs"),
            "tp_size": 1,
            "start_bound_s": 600,
        },
    )
    result, trace = serve(env, tmp_path, "hangs")
    assert result.status == "error" and "timed out after 3 s" in result.reason, result
    assert gone(trace["workers"])


def test_tp_size_follows_the_gpus_and_without_mock_mode_answers_are_counted(tmp_path: Path) -> None:
    build = make_env(tmp_path, mock=False)
    one = [Gpu(index=0, name="Fake H100", compute_capability="9.0", sm="sm_90")]
    result, trace = serve(build, tmp_path, "ok", gpus=one)
    assert (
        result.status == "pass"
        and "TP 1" in result.reason
        and "answers counted, not checked" in result.reason
    )
    assert (
        "--sampling-backend" not in trace["argv"]
        and "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE" not in trace["env"]
    )
    assert [dummy_model.tp_size(n) for n in (0, 1, 2, 3, 4, 6, 8, 16)] == [1, 1, 2, 2, 4, 4, 8, 8]


def test_without_sglang_or_without_a_gpu_it_skips(tmp_path: Path) -> None:
    build = tmp_path / "bare"
    uvtool.run(["venv", str(build / "venv"), "--python", sys.executable, "--quiet"])
    result, _ = serve(build, tmp_path, "ok")
    assert result.status == "skip" and "torch" in result.reason
    os.environ.pop("FAKE_SGLANG", None)


class _Foreign(BaseHTTPRequestHandler):
    """Another program's server on the port the check chose: /health 200 (or 404 for `answer`), /generate counted."""

    answer = 200
    generated: list[str] = []

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(self.answer)
        self.end_headers()

    def do_POST(self) -> None:
        self.generated.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps([{"output_ids": [0] * 8} for _ in body["input_ids"]]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize("answer", [200, 404], ids=["answers-health", "not-sglang"])
def test_a_port_taken_before_the_server_binds_it_is_left_for_another(
    env: Path, tmp_path: Path, answer: int
) -> None:
    """Another process takes the port between the check's choice and the server's bind (this test, as soon as the
    stand-in says its --port, while it loads): the server cannot bind it and exits with "address already in use", or
    the other process answers /health itself. The check never talks to a server it did not start: it starts its
    own again on another port, and passes there."""
    trace = tmp_path / "trace.json"
    taken: dict[str, object] = {}

    def take() -> None:
        deadline = time.monotonic() + 60
        argv: list[str] = []
        # the stand-in's file exists before its JSON is written
        while time.monotonic() < deadline and not argv:
            with contextlib.suppress(OSError, ValueError, KeyError):
                argv = json.loads(trace.read_text())["argv"]
            time.sleep(0.01)
        with contextlib.suppress(OSError, ValueError):
            port = int(argv[argv.index("--port") + 1])
            server = ThreadingHTTPServer(
                ("127.0.0.1", port), type("Foreign", (_Foreign,), {"answer": answer})
            )
            taken.update(port=port, server=server)
            server.serve_forever()

    _Foreign.generated = []
    racer = threading.Thread(target=take, daemon=True)
    racer.start()
    try:
        result, last = serve(env, tmp_path, "ok")
    finally:
        server = taken.get("server")
        if isinstance(server, ThreadingHTTPServer):
            server.shutdown()
            server.server_close()
    assert "port" in taken, "the stand-in never said its port"
    assert _Foreign.generated == [], "the check asked another program's server"
    assert result.status == "pass", result
    details = result.details.to_json()
    assert details["port"] != taken["port"] and last["argv"][last["argv"].index("--port") + 1] == str(
        details["port"]
    )
    assert f"port {taken['port']} was taken" in Path(str(details["log"])).read_text()


def test_each_run_keeps_its_own_log(env: Path, tmp_path: Path) -> None:
    """Two runs of the check on one build at once (two `provision check`, a check beside a create's): each server's
    log is a file of its own, named in its details, and holds that server's words only; an earlier run's stays."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda n: serve(env, tmp_path / str(n), "ok"), range(2)))
    (first, _), (second, _) = runs
    assert first.status == second.status == "pass", runs
    logs = [Path(str(r.details.to_json()["log"])) for r in (first, second)]
    assert logs[0] != logs[1] and {log.parent for log in logs} == {env / "logs"}, logs
    for result, log in zip((first, second), logs, strict=True):
        said = log.read_text()
        assert f"127.0.0.1:{result.details.to_json()['port']}" in said and said.count("fired up") == 1, said
    for number in range(12):  # older runs': the oldest go, the newest KEPT_LOGS stay (this run's among them)
        (env / "logs" / f"sglang-serve-20000101-000000-{number:08}.log").write_text("old\n")
    later, _ = serve(env, tmp_path / "later", "ok")
    assert all(log.is_file() for log in logs) and Path(str(later.details.to_json()["log"])) not in logs
    assert len(list((env / "logs").glob("sglang-serve-*.log"))) == 10
    assert not (env / "logs" / "sglang-serve-20000101-000000-00000000.log").exists()
