"""SGLang serves: its server started from this environment on provision's weight-free model folder (random weights,
no tokenizer), on a free local port with the TP size the GPUs allow; generate requests by token ids, each answer
counted; the server and every process it started (its process group) stopped. Where the installed SGLang has its
deterministic mock mode (a token-oracle sampler and a KV-cache canary, 0.5.23), the canary checks every KV-cache
write, and a violation kills the server: the answers are then checked, not only counted."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from _common import arguments, emit, free_port

MAX_NEW_TOKENS = 8
PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8], [100, 101, 102], [257, 72, 101, 108, 108, 111]]
MOCK_FLAGS = [
    "--sampling-backend",
    "token_oracle",
    "--cuda-graph-backend-prefill=disabled",
    "--kv-canary",
    "raise",
]
MOCK_ENV = {"SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE": "1", "SGLANG_KV_CANARY_ENABLE_WRITE_INPUT_ASSERT": "1"}


def has_mock_mode() -> bool:
    """The installed SGLang ships the token oracle and the KV canary (found as files: nothing of sglang imported)."""
    spec = importlib.util.find_spec("sglang")
    folders = list(spec.submodule_search_locations or []) if spec else []
    return any((Path(f) / "srt" / "kv_canary" / "token_oracle").is_dir() for f in folders)


def tail(path: Path, lines: int = 25, since: int = 0) -> str:
    """The last `lines` of the log, of what was written from offset `since` on (this server's start)."""
    try:
        with open(path, "rb") as log:
            log.seek(max(since, os.path.getsize(path) - 64 * 1024))
            return "\n".join(log.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def adopt_orphans() -> None:
    """Make this payload the subreaper of what it starts (PR_SET_CHILD_SUBREAPER): a server process that leaves the
    process group (setsid) and double-forks is reparented here, not to init, so that `stop` still finds it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server and every process it started (its scheduler and detokenizer, one per TP rank), then
    SIGKILL. They share this payload's process group, so that the runner's timeout, which kills that group whole,
    stops them too; this process ignores the SIGTERM it sends there, and SIGKILLs the others one by one. A process
    that left the group (a session of its own) is found as a descendant of this one (adopt_orphans) and goes too."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgid(0)
    os.killpg(group, signal.SIGTERM)
    for pid in others(group):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and others(group):
        process.poll()
        reap()
        time.sleep(0.2)
    for pid in others(group):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.poll()
    reap()


def reap() -> None:
    """Wait for the adopted processes that ended (zombies whose parent is now this one)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def others(group: int) -> list[int]:
    """The live processes of `group`, and every live descendant of this one, other than this one (zombies are dead:
    their parent reaps them)."""
    parents, found = {}, set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        parents[int(entry)] = int(fields[1])
        if int(fields[2]) == group:
            found.add(int(entry))
    mine, grew = {os.getpid()}, True
    while grew:  # descendants, whatever their group or session
        grew = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sorted(found | (mine - {os.getpid()}))


class _Stay(urllib.request.HTTPRedirectHandler):
    """No redirect is followed: the check speaks to the server it started, and to no other (a 3xx is an HTTPError)."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(_Stay)


def post(url: str, body: dict[str, object], timeout: float) -> object:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with OPENER.open(request, timeout=timeout) as answer:  # 127.0.0.1, the server we started
        return json.loads(answer.read(16 << 20))


KEPT_LOGS = 10  # the server logs kept in the build's logs/ folder, the newest (this run's among them)


def own_log(folder: Path) -> Path:
    """A new log file of this run's own in `folder`, sglang-serve-STAMP-XXXXXXXX.log (STAMP the UTC time; made with
    O_EXCL): two runs at once (two `provision check` of one build) or one after another never write one file; the
    oldest beyond KEPT_LOGS go."""
    import tempfile

    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob("sglang-serve-*.log"))[: -(KEPT_LOGS - 1)]:  # the stamp sorts them by age
        with contextlib.suppress(OSError):
            old.unlink()
    # the UTC time: a name of the local time sorted a run under TZ=UTC 14 hours before one under Pacific/Kiritimati
    fd, name = tempfile.mkstemp(
        prefix=time.strftime("sglang-serve-%Y%m%d-%H%M%S-", time.gmtime()), suffix=".log", dir=folder
    )
    os.close(fd)
    return Path(name)


def answered(
    process: subprocess.Popen[bytes],
    port: int,
    started: float,
    bound: float,
    log_path: Path,
    since: int,
    details: dict[str, object],
) -> str | None:
    """Wait for the server to answer /health: None once it does, or how its port was lost to another process (it
    could not bind it; another program answers there). A server that dies otherwise, or answers nothing within
    `bound`, is the verdict (emit)."""
    while True:
        if process.poll() is not None:
            said = tail(log_path, since=since)
            if "address already in use" in said.lower() or "[errno 98]" in said.lower():  # EADDRINUSE
                return "the server could not bind it (address already in use)"
            emit(
                "fail",
                f"the SGLang server exited with code {process.returncode} before it answered",
                log_tail=said,
                **details,
            )
        try:
            with OPENER.open(f"http://127.0.0.1:{port}/health", timeout=5) as answer:  # no redirect followed
                if answer.status == 200:
                    return None if listener_is_ours(port) else "another program answers /health there"
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() - started > bound:
            emit(
                "fail",
                f"the SGLang server did not answer /health within {bound:g} s",
                log_tail=tail(log_path, since=since),
                **details,
            )
        time.sleep(1.0)


def listener_is_ours(port: int) -> bool:
    """Whether the socket listening on `port` is held by a process this payload started (of its group, or a
    descendant): a port taken by another program between its choice and the server's bind is answered by that
    program. True where /proc cannot tell."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                lines = rows.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st ... inode (the 10th)
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return True
    for pid in others(os.getpgid(0)):
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return True
    return False


def server_command(model: str, port: int, tp: int, mock: bool) -> list[str]:
    """The server's command line; every flag in it is one SGLang 0.5.23's parser accepts (a network-tier test reads
    them from the released wheel)."""
    return [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--load-format",
        "dummy",
        "--skip-tokenizer-init",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tp-size",
        str(tp),
        "--mem-fraction-static",
        "0.3",
        *(MOCK_FLAGS if mock else []),
    ]


ATTEMPTS = 3  # ports tried: one another process takes between its choice and the server's bind is left to it


def main() -> None:
    args = arguments()
    model, log_path = args["model_path"], own_log(Path(args["log_dir"]))
    tp, bound = int(args.get("tp_size") or 1), float(args.get("start_bound_s") or 600)
    mock = has_mock_mode()
    env = {**os.environ, **(MOCK_ENV if mock else {})}
    started = time.monotonic()
    adopt_orphans()
    taken: list[int] = []
    for _attempt in range(ATTEMPTS):
        port = free_port()  # free now: another process may take it before the server binds it (a race), so
        command = server_command(model, port, tp, mock)  # the server that answers is checked to be ours
        details = {"command": command, "tp_size": tp, "mock_mode": mock, "log": str(log_path), "port": port}
        details["ports_taken"] = taken
        since = log_path.stat().st_size
        with open(log_path, "ab") as log:
            # in this payload's process group, which the runner kills whole at the check's timeout
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        try:
            lost = answered(process, port, started, bound, log_path, since, details)
        except BaseException:  # a verdict said (SystemExit), a Ctrl-C: the server goes
            stop(process)
            raise
        if lost is None:
            break
        stop(process)
        taken.append(port)
        with open(log_path, "ab") as log:
            log.write(
                f"\nprovision: port {port} was taken: {lost}; the server starts again on another\n".encode()
            )
    else:
        emit("fail", f"the SGLang server's port was taken by another process {ATTEMPTS} times", **details)
    try:
        base = f"http://127.0.0.1:{port}"
        details["start_s"] = round(time.monotonic() - started, 1)
        sampling = {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0.0, "ignore_eos": True}
        try:
            answers = post(
                base + "/generate", {"input_ids": PROMPTS, "sampling_params": sampling}, timeout=bound
            )
        # nested past the limit: garbage
        except (
            urllib.error.URLError,
            OSError,
            ValueError,
            RecursionError,
        ) as exc:
            emit(
                "fail",
                f"POST /generate failed: {type(exc).__name__}: {str(exc)[:300]}",
                log_tail=tail(log_path),
                **details,
            )
        if not isinstance(answers, list) or len(answers) != len(PROMPTS):
            emit(
                "fail",
                f"POST /generate: expected {len(PROMPTS)} answers, got {str(answers)[:200]}",
                **details,
            )
        counts = [len(a.get("output_ids") or []) if isinstance(a, dict) else -1 for a in answers]
        details["output_tokens"] = counts
        if any(count != MAX_NEW_TOKENS for count in counts):
            emit(
                "fail",
                f"asked for {MAX_NEW_TOKENS} tokens a request, got {counts}",
                log_tail=tail(log_path),
                **details,
            )
        if "kv_canary violation" in tail(log_path, 400):
            emit("fail", "the KV-cache canary reported a violation", log_tail=tail(log_path), **details)
    finally:
        stop(process)
    how = "mock mode: token oracle and KV canary" if mock else "random weights; answers counted, not checked"
    emit(
        "pass",
        f"SGLang served {len(PROMPTS)} requests x {MAX_NEW_TOKENS} tokens at TP {tp} "
        f"(started in {details['start_s']} s; {how})",
        **details,
    )


if __name__ == "__main__":
    main()
