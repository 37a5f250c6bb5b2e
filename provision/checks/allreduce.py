"""`provision bench allreduce`: nccl-tests' all_reduce_perf, run in the environment under test, one process per GPU,
stored with the environment. NVLS (multicast) is never enabled: NCCL_NVLS_ENABLE=0 for every run."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import statistics
from pathlib import Path

from provision import proc
from provision.checks import payload_dir
from provision.checks import runner as check_runner
from provision.envs.records import EnvRecord
from provision.errors import EnvError, ProvisionError, UsageError
from provision.log import Progress
from provision.records.allreduce_runs import AllreduceRow, AllreduceRun, NcclTestsFailure, VariantRun
from provision.records.results import MalformedResult, Reader
from provision.stacks.urls import redact_text

FORBIDDEN_ALGOS = ("nvls", "nvlstree")


def parse_size(text: str) -> int:
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B")
    unit = text[-1] if text and text[-1] in units else ""
    try:
        size = int(float(text[: len(text) - len(unit)]) * units[unit])
    except (ValueError, OverflowError) as exc:  # "abc", "nan"; "inf" overflows int()
        raise UsageError(f"{text!r} is not a size", "write it as 8, 42K, 2.5M or 128M") from exc
    if size <= 0 or size > 2**40:
        raise UsageError(
            f"{text!r} is not a size between 1 byte and 1 TiB", "write it as 8, 42K, 2.5M or 128M"
        )
    return size


def _refuse_nvls(algo: str, shown: str | None = None) -> None:
    """NVLS (NCCL_ALGO=NVLS or NVLSTree, alone or in a per-collective list) uses multicast: never enabled. `shown` is
    what the error names instead of the value (one given by --nccl-env may carry a secret)."""
    if any(name in algo.lower().replace(" ", "") for name in FORBIDDEN_ALGOS):
        raise UsageError(
            f"{shown or 'NCCL_ALGO=' + algo}: NVLS uses multicast, which provision never enables",
            "choose Ring or Tree (per collective: allreduce:tree)",
        )


def variants(algos: tuple[str, ...], protos: tuple[str, ...]) -> list[dict[str, str]]:
    for algo in algos:
        _refuse_nvls(algo)
    if not algos and not protos:
        return [{}]
    combos = []
    for algo in algos or ("",):
        for proto in protos or ("",):
            combo = {}
            if algo:
                combo["NCCL_ALGO"] = algo
            if proto:
                combo["NCCL_PROTO"] = proto
            combos.append(combo)
    return combos


def nccl_env(pairs: tuple[str, ...]) -> dict[str, str]:
    """NAME=VALUE settings for every run of this call: NCCL's own variables only, never NVLS."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.startswith("NCCL_") or not key.replace("_", "").isalnum():
            # only the leading name is shown: what follows may be a secret (NCCL_PASSWORD:value, a mistyped =)
            # the name before "=" is shown; nothing after it, nor a bare value (NCCL_PASSWORD:value, or the secret alone)
            leading = re.match(r"NCCL_[A-Za-z0-9_]*", key)
            name = key if sep and not re.search(r"[:@]", key) else leading[0] if leading else ""
            shown = f"{name}=..." if sep else f"{name}..."
            raise UsageError(
                f"--nccl-env {shown!r}: not NCCL_NAME=VALUE (its value not shown)",
                "for example --nccl-env NCCL_GRAPH_MIXING_SUPPORT=0",
            )
        if key == "NCCL_NVLS_ENABLE":
            raise UsageError(
                f"--nccl-env {key}=...: NVLS uses multicast, which provision never enables", "leave NVLS off"
            )
        if key == "NCCL_ALGO":
            _refuse_nvls(value, shown=f"--nccl-env {key}=... (its value not shown)")
        settings[key] = value
    return settings


SECRET_WORDS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "KEY", "CREDENTIAL")
_USERINFO = re.compile(r"(^|[\s,;=])[^/\s@,;=]+@")  # user:password@host without a scheme, alone or in a list
_SECRET_PAIR = re.compile(r"((?:" + "|".join(SECRET_WORDS) + r")\w*[=:])[^\s,;&]+", re.IGNORECASE)


def _secret_name(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS)


def shown_settings(settings: dict[str, str]) -> dict[str, str]:
    """NCCL variables as stored and printed: the value of a name that says secret is ****, and so are credentials in
    a URL (urls.redact_text's rule), user:password@ without a scheme and token=... inside a value. The processes
    get the real values."""
    shown = {}
    for name, value in settings.items():
        value = _SECRET_PAIR.sub(r"\1****", _USERINFO.sub(r"\1****@", redact_text(value)))
        shown[name] = "****" if _secret_name(name) else value
    return shown


def _secrets(settings: dict[str, str]) -> dict[str, str]:
    """Each secret value of `settings` -> what is shown for it, longest first ("1" or "0" would garble a message when
    replaced, and is no secret)."""
    shown = shown_settings(settings)
    pairs = {
        value: shown[name] for name, value in settings.items() if len(value) >= 4 and shown[name] != value
    }
    return dict(sorted(pairs.items(), key=lambda pair: -len(pair[0])))


def hide_secrets(settings: dict[str, str]) -> None:
    """Tell the log never to print a secret of `settings`: -v shows a failed child's output, which may echo it."""
    from provision import log

    for value, shown in _secrets(settings).items():
        log.hide(value, shown)


def scrub(text: str, settings: dict[str, str]) -> str:
    """`text` (a process's output in a message) without any secret of `settings` in it (NCCL_DEBUG=INFO echoes them)."""
    for value, shown in _secrets(settings).items():
        text = text.replace(value, shown)
    return redact_text(text)


GRAPH_MIXING_NOTE = (
    "graph-captured all-reduces up to 1 MB took {ratio:.2f}x nccl-tests' time with NCCL_GRAPH_MIXING_SUPPORT "
    "at its default: on 2 x H200 setting it to 0 brought them to 0.94-0.97x (and the 122 x 42 KB pass from "
    "2.85 to 0.77 ms); try --nccl-env NCCL_GRAPH_MIXING_SUPPORT=0, safe where captured and eager NCCL "
    "calls on one communicator never run at the same time"
)


def notes_for(rows: list[AllreduceRow], variant: dict[str, str]) -> list[str]:
    """What the figures say to do: today, the graph-mixing cost when nccl-tests shows it."""
    ratios = [row.graph_ratio for row in rows if row.size <= 2**20 and row.graph_ratio is not None]
    if ratios and statistics.median(ratios) > 1.2 and variant.get("NCCL_GRAPH_MIXING_SUPPORT") != "0":
        return [GRAPH_MIXING_NOTE.format(ratio=statistics.median(ratios))]
    return []


def run(
    build: Path,
    record: EnvRecord,
    *,
    min_bytes: int,
    max_bytes: int,
    factor: int,
    iters: int,
    algos: tuple[str, ...],
    protos: tuple[str, ...],
    backend: str,
    ranks: int | None,
    nccl_tests: Path | None = None,
    settings: dict[str, str] | None = None,
    progress: Progress = lambda _: None,
) -> AllreduceRun:
    """Run the sweep once per NCCL variant (nccl-tests beside it when found); the caller stores the run (envs/records.py)."""
    from provision.checks import nccl_tests as anchors
    from provision.machine import nvml

    anchor_binary = anchors.find(nccl_tests) if backend == "nccl" else None

    if backend == "nccl":
        gpus = nvml.read(nvml.load_library()).gpus
        if not gpus:
            raise EnvError(
                "no NVIDIA GPU on this machine: the NCCL all-reduce needs one",
                "--backend gloo --ranks N runs it on CPUs",
            )
        world = ranks or len(gpus)
    else:
        world = ranks or 2
    hide_secrets(settings or {})
    python = record.venv_path(build) / "bin" / "python"
    runs: list[VariantRun] = []
    try:
        for variant in variants(algos, protos):
            # after a hung or failed all_reduce_perf, the later variants run without it: it would only fail again
            failed = any(earlier.anchor_error is not None for earlier in runs)
            done = _run_variant(
                python,
                record,
                {**(settings or {}), **variant},
                world=world,
                backend=backend,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                factor=factor,
                iters=iters,
                anchor_binary=None if failed else anchor_binary,
                progress=progress,
            )
            if failed and anchor_binary is not None:
                done = dataclasses.replace(
                    done,
                    nccl_tests=NcclTestsFailure(
                        path=str(anchor_binary), error="not run: it failed in an earlier variant"
                    ),
                )
            runs.append(done)
    except ProvisionError as exc:  # a process's output in the message may echo an --nccl-env secret
        exc.message, exc.hint = scrub(exc.message, settings or {}), scrub(exc.hint, settings or {})
        exc.args = (exc.message,)
        raise
    return AllreduceRun(
        at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        backend=backend,
        world_size=world,
        runs=runs,
    )


def _run_variant(
    python: Path,
    record: EnvRecord,
    variant: dict[str, str],
    *,
    world: int,
    backend: str,
    min_bytes: int,
    max_bytes: int,
    factor: int,
    iters: int,
    anchor_binary: Path | None,
    progress: Progress,
) -> VariantRun:
    """One variant's rows (nccl-tests' beside them), its NCCL variables as shown and stored (secrets ****)."""
    env = check_runner.environment(python.parent.parent, record)
    env.update(variant)
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    arguments = {
        "gpu_count": world,
        "backend": backend,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "factor": factor,
        "iters": iters,
    }
    progress(f"all-reduce on {world} rank(s) {shown_settings(variant) or 'NCCL defaults'}")
    # its ranks go with it: none holds a GPU on
    done = proc.run(
        [python, str(payload_dir() / "bench_allreduce.py"), json.dumps(arguments)],
        timeout=1800,
        env=env,
        keep=check_runner.KEPT_OUTPUT,
        group=True,
    )
    last = next((line for line in reversed(done.stdout.splitlines()) if line.startswith("{")), "")
    try:
        answer = Reader(json.loads(last))  # the payload's verdict: {"status", "reason", "details"}
        if answer.status() != "pass":
            raise EnvError(
                f"the all-reduce benchmark failed: {answer.text('reason')}",
                "run provision check --only nccl-allreduce",
            )
        measured = VariantRun.parse(
            Reader({**(answer.mapping("details") or {}), "variant": shown_settings(variant)}, "details")
        )
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past the recursion limit
        raise EnvError(
            f"the all-reduce benchmark crashed (exit {done.returncode}): {done.tail(3)}",
            "run provision check first",
        ) from None
    except MalformedResult as exc:
        raise EnvError(
            f"the all-reduce benchmark's answer is malformed: {exc}",
            "run provision check --only nccl-allreduce",
        ) from None
    if anchor_binary is not None:
        progress(
            f"nccl-tests {anchor_binary.name} on {world} GPU(s) {shown_settings(variant) or 'NCCL defaults'}"
        )
        measured = beside_nccl_tests(
            measured,
            variant,
            anchor_binary,
            venv=python.parent.parent,
            env=env,
            world=world,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            factor=factor,
            iters=iters,
        )
    return measured


def beside_nccl_tests(
    measured: VariantRun,
    variant: dict[str, str],
    binary: Path,
    *,
    venv: Path,
    env: dict[str, str],
    world: int,
    min_bytes: int,
    max_bytes: int,
    factor: int,
    iters: int,
    **bounds: float,
) -> VariantRun:
    """`measured` with nccl-tests' figures beside its rows; when all_reduce_perf fails or hangs, provision's figures
    stay as they are and `nccl_tests.error` says in one line what happened."""
    from provision.checks import nccl_tests as anchors

    anchor_env = dict(env)
    nccl_dir = anchors.nccl_library_dir(venv)
    if nccl_dir is not None:
        anchor_env["LD_LIBRARY_PATH"] = os.pathsep.join(
            filter(None, [str(nccl_dir), env.get("LD_LIBRARY_PATH")])
        )
    try:
        anchor = anchors.compare(
            binary,
            world=world,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            factor=factor,
            iters=iters,
            env=anchor_env,
            **bounds,
        )
    except ProvisionError as exc:
        hung = exc if isinstance(exc, anchors.Hung) else None
        return dataclasses.replace(
            measured,
            nccl_tests=NcclTestsFailure(
                path=str(binary),
                error=scrub(f"{exc.message}; provision's own figures are kept: {exc.hint}", variant),
                hung_size=hung.size if hung else None,
                hung_after_s=round(hung.waited_s, 1) if hung else None,
            ),
        )
    rows = anchors.join(measured.rows, anchor)
    return dataclasses.replace(measured, rows=rows, nccl_tests=anchor, notes=notes_for(rows, variant))
