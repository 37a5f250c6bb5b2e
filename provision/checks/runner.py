"""Run checks against an environment: each payload in its own process, bounded by its timeout, its verdict read from
the last line it prints. Overall status is the worst; FAIL or ERROR stops an environment from becoming active."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from provision import durations, knowledge, proc
from provision.checks import payload_dir
from provision.envs.records import EnvRecord
from provision.errors import UsageError
from provision.log import Progress
from provision.machine import probe
from provision.machine.facts import Driver, Gpu
from provision.records.checks import BY_ID, CHECKS, Check
from provision.records.results import CheckResult, MalformedResult
from provision.status import Status


def select(ids: tuple[str, ...] | None, required: list[str] | None) -> list[Check]:
    wanted = list(ids) if ids else (required or [c.id for c in CHECKS])
    unknown = [i for i in wanted if i not in BY_ID]
    if unknown:
        raise UsageError(f"unknown check {unknown[0]!r}", f"known checks: {', '.join(BY_ID)}")
    for always in ("drift", "imports"):  # quick, GPU-free, and what every other check assumes
        if not ids and always not in wanted:
            wanted.insert(0, always)
    return [c for c in CHECKS if c.id in wanted]


def environment(
    venv: Path, record: EnvRecord, gpus: list[Gpu] | None = None, build: Path | None = None
) -> dict[str, str]:
    """The variables a payload runs with; with `gpus`, an [env] that names {arch_list} is filled for these GPUs."""
    import os

    extra = dict(record.env)
    template = record.env_template
    if template and gpus is not None and build is not None:
        from provision.envs.variables import resolve_env

        extra = resolve_env(template.env, build, gpus, template.nvcc)
    extra["VIRTUAL_ENV"] = str(venv)
    extra["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    extra["PYTHONNOUSERSITE"] = "1"
    return proc.environment(extra)


def inventory(python: Path, env: dict[str, str]) -> dict[str, str]:
    """Installed distributions of the environment, by normalized name (no package is imported)."""
    done = proc.run([python, str(payload_dir() / "inventory.py")], timeout=120, env=env)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, RecursionError):  # RecursionError: JSON nested past the limit
        return {}


def run(
    build: Path,
    record: EnvRecord,
    *,
    only: tuple[str, ...] | None = None,
    target_sm: str | None = None,
    gpus: list[Gpu] | None = None,
    driver: Driver | None = None,
    progress: Progress = lambda _: None,
    fresh: bool = False,
) -> list[CheckResult]:
    """Run the checks that the environment's profile requires (all without one) and return their results. `fresh`:
    the build was made this minute (create): a file that is not what its lock pins FAILs the drift check."""
    selected = select(only, record.checks_required or None)
    durations.check_timeout()  # before any check runs, not at the first payload
    # `--only drift` before a baseline: no NVML, no venv process
    in_process_only = all(c.id == "drift" for c in selected)
    if gpus is None and not in_process_only:
        # a driver that never answers: a note after the probe's bound, not a hang
        reading = probe.gpu_reading()
        gpus, driver = reading.gpus, reading.driver
    gpus, driver = gpus or [], driver or Driver()
    # what a profile requires or not, a driver
    if driver.nvml.silent and not only and BY_ID["driver"] not in selected:
        # that does not answer is never activated
        selected = [c for c in CHECKS if c in selected or c.id == "driver"]
    venv = record.venv_path(build)
    python = venv / "bin" / "python"
    env = environment(venv, record, gpus, build)
    from provision.envs import home

    # Python would wait on it at start-up: not run
    blocking = None if in_process_only else home.blocking_file(venv)
    installed = {} if in_process_only or blocking else inventory(python, env)
    silent, no_gpu = _without_gpus(driver)
    results = []
    for check in selected:
        progress(f"check {check.id}")
        start = time.perf_counter()
        result: CheckResult
        missing = [need for need in check.needs if not any(alt in installed for alt in need.split("|"))]
        if blocking is not None and check.id != "drift":
            result = _said(
                check,
                "error",
                f"{home.blocking_reason(blocking)}; remove it, or provision restore puts it back",
            )
        elif check.needs_gpu and not gpus and silent and not missing:
            result = _said(check, "error", silent)
        elif check.needs_gpu and not gpus and not silent:
            result = _said(check, "skip", no_gpu)
        elif missing:
            result = _said(
                check, "skip", f"{missing[0].replace('|', ' / ')} is not installed in this environment"
            )
        elif check.id == "drift":
            from provision.envs import (
                drift,  # its readers (packaging's markers, email, importlib.metadata): here only
            )

            if fresh:  # the build create made this minute: against the lock's RECORDs too, a difference FAILs
                from provision.envs import fresh as freshness

                result = freshness.check(venv, build, record)
            else:
                result = drift.check(venv, build, record)
        elif check.payload is None:
            result = _driver(check, record, driver.cuda)
        elif check.id == "sglang-serve":
            result = _payload(
                check,
                python,
                env,
                {
                    **_arguments(check, record, gpus, installed, target_sm),
                    **_serve_arguments(build, len(gpus), check.timeout),
                },
                progress,
            )
        elif check.id != "flashinfer-jit":
            result = _payload(
                check, python, env, _arguments(check, record, gpus, installed, target_sm), progress
            )
        else:
            # FlashInfer's JIT workspace only: pyelftools reads its libraries
            from provision.checks import staleness

            pre = staleness.check(check, record, env, installed)
            result = pre or _payload(
                check, python, env, _arguments(check, record, gpus, installed, target_sm), progress
            )
            if target_sm and result.status in ("pass", "warn"):
                result = staleness.verify_target_cubins(result, target_sm)
        results.append(dataclasses.replace(result, seconds=round(time.perf_counter() - start, 2)))
    return results


def _without_gpus(driver: Driver) -> tuple[str | None, str]:
    """(why what needs a GPU is an ERROR, or None; why it is a SKIP) when no GPU was read. A driver installed that does
    not answer (a module of another version, no permission, a hang) is no machine without GPUs: nothing is made active
    on it."""
    start = driver.nvml
    silent = (
        f"the NVIDIA driver does not answer ({start.state}): {start.reason}; {start.hint}"
        if start.silent
        else None
    )
    return (
        silent,
        "no NVIDIA GPU: no NVIDIA driver on this machine"
        if start.state == "no_driver"
        else "no NVIDIA GPU: NVML found none",
    )


def _said(check: Check, status: Status, reason: str, output_tail: str | None = None) -> CheckResult:
    """A result the runner decides itself (the check did not run, or ran and gave no answer)."""
    return CheckResult(id=check.id, title=check.title, status=status, reason=reason, output_tail=output_tail)


def _arguments(
    check: Check, record: EnvRecord, gpus: list[Gpu], installed: dict[str, str], target_sm: str | None
) -> dict[str, object]:
    return {
        "cuda": record.cuda,
        "gpu_count": len(gpus),
        "gpus": [{"index": g.index, "cc": g.compute_capability, "name": g.name} for g in gpus],
        "packages": record.packages,
        "installed": installed,
        "target_sm": target_sm,
        # FLASHINFER_CUDA_ARCH_LIST's suffix per SM major, from the cited table the report uses too (9.0a; 12.0f with
        # nvcc >= 12.9): the payload cannot import provision
        "arch_suffix": knowledge.gate("flashinfer_jit")["arch_suffix"],
        "family_suffix_min_nvcc": knowledge.gate("flashinfer_jit")["family_suffix_min_nvcc"],
    }


def _serve_arguments(build: Path, gpus: int, timeout: float) -> dict[str, object]:
    """sglang-serve's own: provision's weight-free model folder (written into the build), the folder where each
    run's server log is kept (a file of its own), the TP size these GPUs allow, and how long the server may take to answer (the rest of the check's bound)."""
    from provision.checks import dummy_model

    limit = min(timeout, durations.check_timeout() or timeout)
    return {
        "model_path": str(dummy_model.write(build / "dummy-model")),
        "log_dir": str(build / "logs"),
        "tp_size": dummy_model.tp_size(gpus),
        "start_bound_s": max(limit - 60.0, limit * 0.6),
    }


TIMEOUT_VARIABLE = durations.CHECK_TIMEOUT
# of each of a payload's stdout and stderr, the last characters held: its answer is printed last
KEPT_OUTPUT = 8 << 20


PROGRESS_PREFIX = (
    "progress: "  # a payload's stderr line that says what it is doing (check_imports: each module)
)


def _payload(
    check: Check,
    python: Path,
    env: dict[str, str],
    arguments: dict[str, object],
    progress: Progress = lambda _: None,
) -> CheckResult:
    """The payload's answer: the last line of its stdout that is a JSON object, read into a CheckResult here (the one
    place it is a dict). No answer is a crash; an answer of the wrong shape is an ERROR naming the key."""

    assert check.payload is not None
    limit = min(check.timeout, durations.check_timeout() or check.timeout)

    # its own process group, killed whole: a worker it started (torch's compile pool, nvcc under a JIT build) neither
    # outlives it nor keeps its pipes open (a check of 2 s waited the worker's 66 s, a hung one for ever)
    def said(line: str) -> None:
        if line.startswith(PROGRESS_PREFIX):
            progress(f"check {check.id}: {line.removeprefix(PROGRESS_PREFIX)[:200]}")

    done = proc.run(
        [python, str(payload_dir() / check.payload), json.dumps(arguments)],
        timeout=limit,
        env=env,
        keep=KEPT_OUTPUT,
        group=True,
        on_stderr_line=said,
    )
    if done.timed_out:
        return _said(check, "error", f"timed out after {limit:g} s", done.tail(20))
    last = next((line for line in reversed(done.stdout.strip().splitlines()) if line.startswith("{")), None)
    try:
        answer = json.loads(last) if last else None
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past the recursion limit
        answer = None
    if not isinstance(answer, dict) or "status" not in answer:
        return _said(check, "error", f"the check crashed (exit code {done.returncode})", done.tail(20))
    try:
        result = CheckResult.answer(check.id, check.title, answer)
    except MalformedResult as exc:
        return _said(
            check,
            "error",
            f"the check's answer is malformed ({exc}; exit code {done.returncode})",
            done.tail(20),
        )
    if result.failed and result.output_tail is None:
        result = dataclasses.replace(result, output_tail=done.tail(12))
    return result


def _driver(check: Check, record: EnvRecord, driver_cuda: str | None) -> CheckResult:
    cuda = record.cuda
    if not cuda:
        return _said(
            check,
            "skip",
            "the environment's CUDA release is unknown (adopted without a profile, torch without CUDA)",
        )
    compat = knowledge.minor_compat(driver_cuda, cuda)
    if compat:
        return _said(
            check,
            "pass",
            f"the driver supports CUDA {driver_cuda}; this environment is built for {cuda}, which runs "
            f"under minor-version compatibility (CUDA {compat['major']}.x on R{compat['driver_branch']}+; PTX made by "
            f"CUDA {cuda} does not JIT on it: {compat['ptx_error']})",
        )
    if knowledge.driver_supports(driver_cuda, cuda):
        return _said(check, "pass", f"the driver supports CUDA {driver_cuda} >= {cuda}")
    minimum = knowledge.driver_minimum(cuda)
    return _said(
        check,
        "fail",
        f"the driver supports CUDA {driver_cuda}; this environment is built for {cuda}"
        + (f": install a driver >= {minimum}" if minimum else ""),
    )
