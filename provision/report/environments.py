"""Environments in the report: the scan of every CUDA package against each GPU, version agreement, and the last
check results and baseline figure stored with the environment."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from provision import knowledge, regular
from provision.envs import home as homes
from provision.envs import records
from provision.envs.records import EnvRecord
from provision.log import Progress
from provision.machine.facts import MachineFacts
from provision.report import kernels, ptxjit
from provision.report.features import newer_than_known
from provision.report.gates import Gate, Target, Versions, driver_gate, fabric_gate, machine_gates
from provision.scan import binaries as scan
from provision.status import Status

CHECKS_DOC = "docs/checks.md"  # what each smoke check proves and how it decides


def installed(venv: Path) -> dict[str, str]:
    """{distribution: version} read from the venv's .dist-info folders (nothing is run)."""
    found = {}
    for metadata in venv.glob("lib/python3*/site-packages/*.dist-info/METADATA"):
        try:  # a pipe is not waited on; the headers lie in the first MiB (a long description after them is not read)
            text = regular.read_text(metadata, 1 << 20, errors="replace")
        except OSError:
            continue
        fields = dict(re.findall(r"^(Name|Version): (.+)$", text.split("\n\n", 1)[0], re.MULTILINE))
        if "Name" in fields and "Version" in fields:
            found[str(canonicalize_name(fields["Name"]))] = fields["Version"].strip()
    return found


def versions_gate(versions: dict[str, str]) -> Gate:
    title = "package versions agree"
    problems = []
    flashinfer = {
        n: versions[n].split("+")[0]
        for n in ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
        if n in versions
    }
    if len(set(flashinfer.values())) > 1:
        problems.append("FlashInfer " + ", ".join(f"{n} {v}" for n, v in flashinfer.items()))
    labels = {
        n: m.group(1)
        for n in ("torch", "sgl-kernel", "sglang-kernel", "flashinfer-jit-cache")
        if n in versions and (m := re.search(r"\+cu(\d+)", versions[n]))
    }
    if len({label[:-1] for label in labels.values()}) > 1:
        problems.append("CUDA builds differ: " + ", ".join(f"{n} cu{v}" for n, v in labels.items()))
    runtimes = sorted(
        n
        for n in versions
        if n in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11")
    )
    if (
        "nvidia-cuda-runtime-cu12" in runtimes
        and "nvidia-cuda-runtime" in runtimes
        and versions["nvidia-cuda-runtime"].startswith("13")
    ):
        problems.append(
            "two CUDA runtime majors installed: " + ", ".join(f"{n} {versions[n]}" for n in runtimes)
        )
    source = "https://github.com/flashinfer-ai/flashinfer/blob/main/flashinfer/jit/env.py (version lockstep); torch/sgl-kernel ABI pairing (https://github.com/sgl-project/sglang/tree/main/sgl-kernel)"
    if problems:
        return Gate(id="versions", title=title, status="fail", reason="; ".join(problems), source=source)
    shown = ", ".join(
        f"{n} {versions[n]}"
        for n in ("torch", "sgl-kernel", "sglang-kernel", "flashinfer-python")
        if n in versions
    )
    return Gate(
        id="versions", title=title, status="pass", reason=shown or "nothing to compare", source=source
    )


def scan_gate(
    venv: Path, ccs: list[str], served: tuple[str, ...] = ()
) -> tuple[Gate, scan.ScanResult | None, list[Gate]]:
    """The scan's stack gate, its result, and a feature gate per wheel that only some serving paths load and that
    fails here without the profile serving its feature (report/featurewheels.py)."""
    from provision.report import featurewheels

    title = "every CUDA package carries code for every GPU"
    if not ccs:
        return Gate(id="scan", title=title, status="skip", reason="no GPUs read"), None, []
    result = scan.scan([venv], tuple(ccs))
    source = "fatbin entry headers (docs/fatbin.md); provision/knowledge.toml [[sm_rule]]"
    by_package: dict[str, list[tuple[str, str]]] = {}
    for p in result.packages:
        for cc, (s, r) in p.verdicts.items():
            if s == "fail":
                by_package.setdefault(p.name or "?", []).append((cc, r))
    kept, taken = featurewheels.split(list(by_package), served)
    features = [
        featurewheels.judged(
            Gate(
                id=f"wheel:{name}",
                title=f"{name} carries code for every GPU",
                status="fail",
                source=source,
                reason="; ".join(f"{knowledge.sm_name(cc)}: {r}" for cc, r in by_package[name])[:400],
            ),
            name,
            served,
        )
        for name in taken
    ]
    failing = [f"{name} on {cc}: {r}" for name in kept for cc, r in by_package[name]]
    warning = [
        f"{p.name} on {cc}" for p in result.packages for cc, (s, _) in p.verdicts.items() if s == "warn"
    ]
    if failing:
        return (
            Gate(id="scan", title=title, status="fail", reason="; ".join(failing)[:600], source=source),
            result,
            features,
        )
    if warning:
        return (
            Gate(
                id="scan",
                title=title,
                status="warn",
                reason="PTX only (JIT at first load): " + ", ".join(warning),
                source=source,
            ),
            result,
            features,
        )
    others = (
        f" ({', '.join(g.id.removeprefix('wheel:') for g in features)} aside: features)" if features else ""
    )
    return (
        Gate(
            id="scan",
            title=title,
            status="pass",
            source=source,
            reason=f"{len(result.packages)} CUDA packages, {len(result.files)} files, all with native code for {', '.join(ccs)}{others}",
        ),
        result,
        features,
    )


def torch_build_gate(versions: dict[str, str], result: scan.ScanResult | None) -> Gate:
    """FAIL for a CPU build of torch: a `+cpu` version, or a torch whose libraries carry no CUDA code at all."""
    title = "torch is a CUDA build"
    source = "https://pytorch.org/get-started/locally/ (CPU and CUDA builds); fatbin entry headers (docs/fatbin.md)"
    version = versions.get("torch")
    if version is None:
        return Gate(
            id="torch-build", title=title, status="skip", reason="no torch in this environment", source=source
        )
    scanned = next((p for p in result.packages if p.name == "torch"), None) if result else None
    if version.endswith("+cpu") or (result is not None and scanned is None):
        return Gate(
            id="torch-build",
            title=title,
            status="fail",
            source=source,
            reason=f"torch is a CPU build (torch {version}: no CUDA code in its libraries); install a CUDA build of torch",
        )
    if scanned is None:
        return Gate(
            id="torch-build",
            title=title,
            status="skip",
            reason=f"torch {version}: not scanned (no GPUs read)",
            source=source,
        )
    labels = sorted(scanned.counts.cubin, key=_label_order)
    return Gate(
        id="torch-build",
        title=title,
        status="pass",
        source=source,
        reason=f"torch {version} carries {' '.join(labels) or 'PTX only'}",
    )


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _label_order(label: str) -> tuple[int, str]:
    digits = "".join(ch for ch in label if ch.isdigit())
    return int(digits or 0), label


def stored_gates(record: EnvRecord) -> list[Gate]:
    results = record.check_results
    gates = []
    if results:
        bad = [f"{r.id}: {r.reason}" for r in results if r.failed]
        status: Status = "fail" if bad else "pass"
        reason = (
            "; ".join(bad)[:500]
            if bad
            else f"{sum(r.status == 'pass' for r in results)} pass, {sum(r.status == 'skip' for r in results)} skip"
        )
        gates.append(
            Gate(
                id="checks",
                title=f"last smoke checks ({record.checks.at if record.checks else '?'})",
                status=status,
                reason=reason,
                source=CHECKS_DOC,
            )
        )
    else:
        gates.append(
            Gate(
                id="checks",
                title="last smoke checks",
                status="warn",
                reason="never checked: run provision check",
                source=CHECKS_DOC,
            )
        )
    subset = record.checks_subset
    if subset is not None and subset.results:
        shown = ", ".join(f"{r.id} {r.status}" for r in subset.results)
        gates.append(
            Gate(
                id="checks-only",
                title=f"later check --only run ({subset.at or '?'})",
                status="info",
                kind="feature",
                reason=shown,
                source=CHECKS_DOC,
            )
        )
    if record.baselines:
        last = record.baselines[-1]
        gates.append(
            Gate(
                id="baseline",
                title="last baseline",
                status="info",
                kind="feature",
                reason=f"{last.figure or 0:.2f} {last.unit} on {last.machine.summary} ({last.at})",
                source="docs/checks.md (Baselines)",
            )
        )
    return gates


def drift_gate(venv: Path, build: Path, record: EnvRecord) -> Gate:
    """The drift check, live: what differs from the RECORDs and the lock now (it remembers what it hashed)."""
    from provision.envs import drift

    result = drift.check(venv, build, record)
    return Gate(
        id="drift",
        title="installed files match their RECORD, distributions the lock",
        status=result.status,
        reason=result.reason[:600],
        source="docs/checks.md (Drift and restore): each distribution's RECORD "
        "(https://packaging.python.org/en/latest/specifications/recording-installed-packages/), the PEP 751 lock",
    )


def kept_gate(record: EnvRecord) -> Gate | None:
    """The files of the known-good state beside the lock (accepted, the profile's [files]): what drift judges them by."""
    kept = record.kept_files()
    if not kept:
        return None
    shown = "; ".join(
        f"{k.origin} {k.path} (sha256 {k.sha256[:12]}"
        + (f", from {k.source}" if k.source else "")
        + (f", over {k.owner}" if k.owner else "")
        + ")"
        for k in kept.values()
    )
    return Gate(
        id="kept-files",
        title="accepted and profile files (known-good beside the lock)",
        status="info",
        kind="feature",
        reason=shown[:600],
        source="provision accept; the profile's [files] (docs/profiles.md)",
    )


def _served(record: EnvRecord) -> tuple[str, ...]:
    """The features the environment's profile serves, as its lock recorded them (none without a readable lock)."""
    from provision.errors import ProvisionError
    from provision.stacks import lockfile

    try:
        return lockfile.read(Path(record.lock))[1].serves if record.lock else ()
    except ProvisionError:
        return ()  # the drift gate names an unreadable lock


def upgrade_gate(build: Path) -> Gate | None:
    """The upgrade that built or moved to this environment (`provision upgrade`): its decision, why, and its undo."""
    from provision.envs import upgrades
    from provision.errors import EnvError

    try:
        found = upgrades.read(build / upgrades.UPGRADE_FILE)
    except EnvError as exc:
        return Gate(
            id="upgrade",
            title="the upgrade to it",
            status="info",
            kind="feature",
            reason=exc.message,
            source="provision upgrade (envs/upgrades.py)",
        )
    if found is None:
        return None
    s = found.settings
    decision = (
        found.decision
        or f"unfinished (last finished step: {found.last_finished()}; provision upgrade --resume)"
    )
    said = (
        f"from {s.from_env}, started {found.started}: {decision}"
        + (f": {found.reason}" if found.reason else "")
        + (f"; undo: {found.undo}" if found.undo else "")
    )
    return Gate(
        id="upgrade",
        title="the upgrade to it",
        status="info",
        kind="feature",
        reason=said[:600],
        source="provision upgrade (envs/upgrades.py)",
    )


def judge(where: homes.Home, name: str, facts: MachineFacts, progress: Progress = lambda _: None) -> Target:
    """The environment `name` on the machine of `facts`: its scan, versions, drift, stored checks and baseline."""
    from provision.report import observed

    build = where.build_of(name)
    record = records.read(build)
    venv = record.venv_path(build)
    ccs = sorted({g.compute_capability for g in facts.gpus if g.compute_capability})
    progress(f"{name}: reading the installed versions")
    versions = installed(venv)
    progress(f"{name}: scanning its CUDA binaries for {', '.join(ccs) or 'no GPU'}")
    scanned_gate, scanned, taken = scan_gate(venv, ccs, _served(record))
    progress(f"{name}: its files against the lock (drift)")
    stack = Versions(found=versions, origin="environment")
    features = machine_gates(facts, stack)
    return Target(
        kind="environment",
        name=name,
        cuda=record.cuda or "?",
        kept_files=tuple(record.kept_files().values()),
        gates=(
            driver_gate(facts, record.cuda)
            if record.cuda
            else Gate(
                id="driver",
                title="driver supports the environment's CUDA",
                status="skip",
                reason="CUDA release unknown",
            ),
            scanned_gate,
            *filter(None, [ptxjit.gate(facts, _ptx_only(scanned), record.cuda)]),
            torch_build_gate(versions, scanned),
            versions_gate(versions),
            drift_gate(venv, build, record),
            *filter(
                None,
                [
                    fabric_gate(facts),
                    newer_than_known(stack),
                    kernels.flashinfer_kernels(stack, nvcc=_nvcc(versions, facts), offline=_offline(record)),
                ],
            ),
            *taken,
            *stored_gates(record),
            *filter(None, [kept_gate(record), upgrade_gate(build)]),
            kernels.caches_gate(record.env, build, Path.home()),
            *observed.apply(features, record.latest_results(), len(facts.gpus), facts),
        ),
    )


def _ptx_only(result: scan.ScanResult | None) -> list[tuple[str, str | None, str]]:
    """(package, version, GPU) where the package runs only through PTX (the scan's WARN)."""
    return [
        (p.name or "?", p.version, cc)
        for p in (result.packages if result else [])
        for cc, (s, _) in p.verdicts.items()
        if s == "warn"
    ]


def _nvcc(versions: dict[str, str], facts: MachineFacts) -> str | None:
    """The CUDA release of the nvcc FlashInfer's JIT would use: the environment's own compiler wheel, else the machine's."""
    own = next((versions[n] for n in ("nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12") if n in versions), None)
    if own:
        return ".".join(own.split(".")[:2])
    return max((t.version for t in facts.toolkits), key=lambda v: _version(v) or Version("0"), default=None)


def _offline(record: EnvRecord) -> bool:
    """Whether the profile the environment was built from says `offline = true` (False where it is not found here)."""
    from provision.errors import ProvisionError
    from provision.stacks import profiles

    try:
        return bool(record.profile) and profiles.load(record.profile_path or record.profile or "").offline
    except ProvisionError:
        return False
