"""Baselines: the profile's benchmark run inside the environment once its checks passed, with the machine it ran on
(the caller stores the run: checks run and judge, envs/records.py writes); `compare` puts two environments' figures
side by side."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from provision import proc
from provision import status as statuses
from provision.checks import payload_dir
from provision.checks import runner as check_runner
from provision.envs import records
from provision.envs.home import Home
from provision.envs.records import BaselineRun, EnvRecord
from provision.errors import EnvError
from provision.machine import nvml

BUILTIN = {"command": ["python", "{payloads}/baseline_builtin.py"], "cwd": ".", "timeout": 900.0, "pattern": None,
           "json_key": "bf16_gemm_tflops", "unit": "TFLOP/s", "better": "higher"}


def machine_fingerprint() -> dict[str, Any]:
    reading = nvml.read(nvml.load_library())
    names = sorted(g.name for g in reading.gpus)
    text = f"{len(names)} x {names[0]}" if names and len(set(names)) == 1 else ", ".join(names) or "no GPU"
    identity = json.dumps([reading.driver.version, [g.uuid for g in reading.gpus]])
    return {"summary": f"{text}, driver {reading.driver.version or '-'}", "id": hashlib.sha256(identity.encode()).hexdigest()[:12]}


def extract(spec: dict[str, Any], stdout: str) -> tuple[float | None, dict[str, Any] | None]:
    """The figure: the last match of the pattern's first group, or a (dotted) key of the last JSON object printed."""
    if spec.get("pattern"):
        matches = re.findall(spec["pattern"], stdout)
        if not matches:
            return None, None
        last = matches[-1]
        return float(last[0] if isinstance(last, tuple) else last), None
    for line in reversed(stdout.strip().splitlines()):
        if line.lstrip().startswith("{"):
            try:
                document = json.loads(line)
            except json.JSONDecodeError:
                continue
            value: Any = document
            for part in str(spec.get("json_key")).split("."):
                value = value.get(part) if isinstance(value, dict) else None
            return (float(value) if isinstance(value, (int, float)) else None), document
    return None, None


def run(name: str, build: Path, record: EnvRecord, progress: Any = lambda _: None) -> BaselineRun:
    """Run the profile's baseline (the built-in one without) in the environment; its checks must have passed."""
    failed = [r["id"] for r in record.check_results if statuses.failed(r["status"])]
    if failed:
        raise EnvError(f"{name}: checks {', '.join(failed)} did not pass; the baseline runs only after they do",
                       f"see provision check {name}")
    spec: dict[str, Any] = record.baseline or BUILTIN
    if spec is BUILTIN and not nvml.read(nvml.load_library()).gpus:
        raise EnvError(f"{name}: the built-in baseline times GPUs, and this machine has no NVIDIA GPU (NVML found none)",
                       "run it on the GPU machine, or give the profile a [baseline] command")
    command = [part.replace("{payloads}", str(payload_dir())) for part in spec["command"]]
    venv = record.venv_path(build)
    env = check_runner.environment(venv, record)
    progress("checking for drift")
    drifted = drift_status(venv, build, record)
    progress(f"running the baseline: {' '.join(command)}")
    start = time.perf_counter()
    done = proc.run(command, timeout=float(spec.get("timeout") or 1800), env=env, cwd=Path(spec.get("cwd") or "."))
    seconds = time.perf_counter() - start
    figure, document = extract(spec, done.stdout)
    if done.timed_out or not done.ok or figure is None:
        why = "timed out" if done.timed_out else f"exit code {done.returncode}" if not done.ok else "no figure in its output"
        raise EnvError(f"{name}: the baseline failed ({why}): {done.tail(3)}", "run it by hand: provision run " + name + " -- " + " ".join(command))
    return BaselineRun(figure=figure, unit=spec.get("unit", ""), better=spec.get("better", "higher"), at=_now(),
                       machine=machine_fingerprint(), command=command, seconds=round(seconds, 2),
                       exit_code=done.returncode, output_tail=done.tail(15), details=document, drift=drifted)


def drift_status(venv: Path, build: Path, record: EnvRecord) -> dict[str, Any]:
    """What the baseline ran on: the drift check's status, counts and first findings (kept with the figure)."""
    from provision.envs import drift

    found = drift.scan_env(venv, build, record)
    return {"status": found.status, "summary": found.summary(), "counts": found.counts(),
            "findings": [f.line() for f in found.findings[:20]]}


def compare(home: Home, first: str, second: str) -> dict[str, Any]:
    """Each environment's latest baseline call (every run of a `baseline --runs N`, else the last run): median and
    spread; the change between the medians, and whether the spreads cover it (within noise)."""
    import statistics

    rows = []
    for name in (first, second):
        record = records.read(home.build_of(name))
        if not record.baselines:
            raise EnvError(f"{name} has no baseline yet", f"run one: provision baseline {name}")
        last = record.baselines[-1]
        series = [r for r in record.baselines if r.series == last.series] if last.series else [last]
        figures = [r.figure for r in series if r.figure is not None]
        median = statistics.median(figures) if figures else None
        rows.append({"name": name, "figure": median, "unit": last.unit, "better": last.better,
                     "at": last.at, "machine": last.machine["summary"], "runs": len(record.baselines),
                     "figures": figures, "median": median, "min": min(figures, default=None), "max": max(figures, default=None),
                     "multi_gpu_allreduce": record.allreduce[-1].to_dict() if record.allreduce else None,
                     "drift": last.drift})
    a, b = rows[0]["median"], rows[1]["median"]
    change = (b - a) / a * 100 if a and b is not None else None
    better = rows[0]["better"]
    improved = None if change is None else (change > 0) == (better == "higher")
    noise = None if change is None else _overlap(rows[0], rows[1])
    same_machine = rows[0]["machine"] == rows[1]["machine"]
    return {"environments": rows, "change_percent": round(change, 2) if change is not None else None,
            "improved": improved, "within_noise": noise, "same_machine": same_machine,
            "drifted": [r["name"] for r in rows if (r["drift"] or {}).get("status") not in (None, "pass")]}


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the two series' ranges (min to max) meet: the spread covers the difference of the medians."""
    return bool(a["max"] >= b["min"] and b["max"] >= a["min"])


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
