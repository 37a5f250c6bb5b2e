"""`provision report`: the machine against each profile and environment, one verdict per gate, each with its source."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from provision import knowledge
from provision.machine.facts import MachineFacts

# the data a report answers with, in report/verdicts.py; read from here by views and commands too
from provision.report.verdicts import Gate as Gate
from provision.report.verdicts import MachineReport as MachineReport
from provision.report.verdicts import Target as Target
from provision.report.verdicts import Versions as Versions
from provision.stacks.profiles import Profile

TOOLKIT_SOURCE = "nvcc --list-gpu-code (https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/); provision/knowledge.toml [[toolkit]]"


def load_machine(path: Path) -> MachineFacts:
    """The facts of a recorded probe document (checked key by key: provision/report/documents.py)."""
    from provision.report import documents

    return documents.load_machine(path)


def judge(
    facts: MachineFacts, profile: Profile, uv_cache: Path | None = None, versions: Versions | None = None
) -> Target:
    """The profile's gates on this machine; `uv_cache` is where to look for its compiler wheel (never downloaded);
    `versions` are the stack's (a lock's), else the profile's pins."""
    from provision.report import features

    versions = versions or Versions.of_profile(profile)
    return Target(
        kind="profile",
        name=profile.name,
        cuda=profile.cuda,
        gates=(
            driver_gate(facts, profile.cuda),
            _toolkit(facts, profile, uv_cache),
            torch_wheels(facts, profile.cuda, has_torch=profile.bound_index("torch") is not None),
            _flashinfer_jit(facts, profile),
            *filter(None, [fabric_gate(facts), features.newer_than_known(versions)]),
            *machine_gates(facts, versions),
        ),
    )


def driver_gate(facts: MachineFacts, cuda: str) -> Gate:
    title = f"driver supports CUDA {cuda}"
    source = knowledge.driver_source(cuda)
    start = facts.driver.nvml
    if start.silent:  # installed, not answering: no GPU of it can run this stack until it does
        return Gate(
            id="driver",
            title=title,
            status="fail",
            source=source,
            reason=f"the NVIDIA driver does not answer ({start.state}): {start.reason}; {start.hint}",
        )
    if facts.driver.cuda is None:
        return Gate(
            id="driver",
            title=title,
            status="skip",
            reason="no NVIDIA driver read on this machine",
            source=source,
        )
    compat = knowledge.minor_compat(facts.driver.cuda, cuda)
    if compat:  # a 13.2 stack on a driver that reports 13.0: it runs, PTX of the newer toolkit aside (the ptx-driver gate)
        return Gate(
            id="driver",
            title=title,
            status="pass",
            source=f"{compat['source']}; {source}",
            reason=f"driver {facts.driver.version} supports CUDA up to {facts.driver.cuda}; note: CUDA {cuda} runs on it "
            f"under minor-version compatibility (CUDA {compat['major']}.x on R{compat['driver_branch']}+), with a "
            f"limited feature set; PTX made by CUDA {cuda} does not JIT on it ({compat['ptx_error']})",
        )
    if knowledge.driver_supports(facts.driver.cuda, cuda):
        return Gate(
            id="driver",
            title=title,
            status="pass",
            source=source,
            reason=f"driver {facts.driver.version} supports CUDA up to {facts.driver.cuda}",
        )
    minimum = knowledge.driver_minimum(cuda)
    need = f"a driver >= {minimum}" if minimum else f"a driver that supports CUDA {cuda}"
    return Gate(
        id="driver",
        title=title,
        status="fail",
        source=source,
        reason=f"driver {facts.driver.version} supports CUDA up to {facts.driver.cuda}; install {need}",
    )


def fabric_gate(facts: MachineFacts) -> Gate | None:
    """FAIL for a GPU whose NVSwitch fabric registration is not complete (CUDA then fails with error 802, 'system not
    ready'); None where no GPU has a fabric (PCIe GPUs, H100 PCIe: NVML answers NotSupported), which is no finding."""
    fabric = [g for g in facts.gpus if g.fabric is not None]
    if not fabric:
        return None
    g = knowledge.gate("fabric")
    bad = [
        f"GPU {gpu.index} {gpu.fabric.state}"
        + (f" (status {gpu.fabric.status})" if gpu.fabric.status else "")
        for gpu in fabric
        if gpu.fabric and (gpu.fabric.state != "completed" or gpu.fabric.status)
    ]
    if bad:
        return Gate(
            id="fabric",
            title=g["title"],
            status="fail",
            source=g["source"],
            reason=f"fabric registration not complete: {', '.join(bad[:8])}{', ...' if len(bad) > 8 else ''}; "
            "CUDA fails with error 802 (system not ready) until it is: start NVIDIA Fabric Manager "
            "(nvidia-fabricmanager), and on B200-class HGX NVLSM (the NVLink subnet manager) beside it",
        )
    cliques = sorted(
        {gpu.fabric.clique_id for gpu in fabric if gpu.fabric and gpu.fabric.clique_id is not None}
    )
    return Gate(
        id="fabric",
        title=g["title"],
        status="pass",
        source=g["source"],
        reason=f"{len(fabric)} GPU(s) registered with the fabric (clique {', '.join(map(str, cliques)) or '?'})",
    )


def own_toolkit(profile: Profile) -> str | None:
    """Return the CUDA release of the compiler a profile installs itself (cuda-toolkit[nvcc] or nvidia-cuda-nvcc)."""
    return profile.compiler_cuda()


def _toolkit(facts: MachineFacts, profile: Profile, uv_cache: Path | None = None) -> Gate:
    from provision.report import compiler

    title = "a CUDA compiler can target every GPU"
    if not facts.gpus:
        return Gate(id="toolkit", title=title, status="skip", reason="no GPUs read")
    own = own_toolkit(profile)
    options: list[tuple[str, list[str], str]] = []
    if own:
        found = compiler.targets(own, uv_cache)
        options.append(
            (
                f"the profile's own {found.name}" if found else f"the profile's own nvcc {own} (not tabled)",
                list(found.sms) if found else [],
                found.source if found else TOOLKIT_SOURCE,
            )
        )
    options += [
        (f"nvcc {t.full_version or t.version} at {t.path}", list(t.sms), TOOLKIT_SOURCE)
        for t in facts.toolkits
    ]
    sms = sorted({g.sm for g in facts.gpus if g.sm})
    for name, targets, source in options:
        if all(sm in targets for sm in sms):
            return Gate(
                id="toolkit",
                title=title,
                status="pass",
                reason=f"{name} targets {', '.join(sms)}",
                source=source,
            )
    if not options:
        return Gate(
            id="toolkit",
            title=title,
            status="warn",
            reason="no CUDA toolkit found and the profile brings none; JIT builds (FlashInfer) cannot run",
            source=TOOLKIT_SOURCE,
        )
    return Gate(
        id="toolkit",
        title=title,
        status="fail",
        source=TOOLKIT_SOURCE,
        reason=f"no compiler targets {', '.join(sms)}: {'; '.join(n for n, _, _ in options)}",
    )


def torch_wheels(
    facts: MachineFacts,
    cuda: str,
    *,
    has_torch: bool = True,
    scanned: dict[str, int] | None = None,
    wheel: str = "",
) -> Gate:
    """Whether PyTorch's wheels carry code for every GPU: from the scanned torch wheel (`scanned` cubin labels) when
    there is one, else from the table of PyTorch's arch list (the fallback, which says so)."""
    title = (
        f"PyTorch cu{cuda.replace('.', '')} wheels carry code for every GPU"
        if cuda != "?"
        else "PyTorch wheels carry code for every GPU"
    )
    if not has_torch:
        return Gate(id="torch-wheels", title=title, status="skip", reason="the profile has no torch")
    if not facts.gpus:
        return Gate(id="torch-wheels", title=title, status="skip", reason="no GPUs read")
    if scanned is not None:
        sms, source, what = (
            sorted(scanned, key=_label_key),
            "fatbin entry headers of the wheel (docs/fatbin.md)",
            f"the scanned wheel {wheel} carries",
        )
    else:
        sms = knowledge.torch_wheel_sms(cuda) or []
        source = next((r["source"] for r in knowledge.tables()["torch_wheels"] if r["cuda"] == cuda), "")
        what = "from the table (provision/knowledge.toml [[torch_wheels]], no torch wheel scanned): official wheels carry"
        if not sms:
            return Gate(
                id="torch-wheels",
                title=title,
                status="skip",
                reason=f"no torch wheel scanned and no table of PyTorch's arch list for CUDA {cuda}: run provision report --lock",
            )
    missing = sorted(
        {
            g.sm or ""
            for g in facts.gpus
            if g.compute_capability and not any(knowledge.label_runs_on(s, g.compute_capability) for s in sms)
        }
    )
    if missing:
        return Gate(
            id="torch-wheels",
            title=title,
            status="fail",
            source=source,
            reason=f"{what} {' '.join(sms) or 'no cubin'}: nothing for {', '.join(missing)} ('no kernel image')",
        )
    return Gate(
        id="torch-wheels", title=title, status="pass", source=source, reason=f"{what} {' '.join(sms)}"
    )


def _label_key(label: str) -> tuple[int, int, str]:
    try:
        _, major, minor, suffix = knowledge.parse_label(label)
    except ValueError:
        return (999, 0, label)
    return (major, minor, suffix)


def flashinfer_version(profile: Profile) -> Version | None:
    """The lowest FlashInfer version a profile admits (the pin, or a >= bound), None without FlashInfer."""
    for package in profile.packages:
        if package.name == "flashinfer-python":
            bounds = [
                Version(s.version) for s in SpecifierSet(package.version) if s.operator in ("==", ">=", "~=")
            ]
            return min(bounds) if bounds else Version("0")
    return None


def _flashinfer_jit(facts: MachineFacts, profile: Profile) -> Gate:
    gate = knowledge.gate("flashinfer_jit")
    title, source = gate["title"], gate["source"]
    if flashinfer_version(profile) is None:
        return Gate(id="flashinfer-jit", title=title, status="skip", reason="the profile has no FlashInfer")
    if not facts.gpus:
        return Gate(id="flashinfer-jit", title=title, status="skip", reason="no GPUs read")
    nvcc = (
        own_toolkit(profile)
        or max((t.version for t in facts.toolkits), key=Version, default=None)
        or profile.cuda
    )
    ccs = [g.compute_capability for g in facts.gpus if g.compute_capability]
    # {arch_list} is filled from this machine's GPUs, as create and check fill it (the same nvcc decides a/f)
    arch_list = (
        profile.env.get("FLASHINFER_CUDA_ARCH_LIST", "")
        .replace("{arch_list}", knowledge.flashinfer_arch_list(ccs, nvcc))
        .split()
    )
    problems, warnings = [], []
    for cc in sorted({g.compute_capability for g in facts.gpus if g.compute_capability}):
        major = cc.split(".")[0]
        need = gate["min_nvcc_for_major"].get(major)
        covered = [a for a in arch_list if _arch_entry_covers(a, cc)]
        if arch_list and not covered:
            problems.append(
                f"the profile's FLASHINFER_CUDA_ARCH_LIST={' '.join(arch_list)} has nothing for {knowledge.sm_name(cc)}: "
                "JIT modules would carry no code for this GPU (set it for this GPU, or leave it unset to detect)"
            )
        if need and not knowledge.version_at_least(nvcc, need):
            if covered and all(a.endswith("a") for a in covered):
                warnings.append(
                    f"nvcc {nvcc} < {need}: SM{major}x only through the '{covered[0]}' workaround"
                )
            else:
                problems.append(
                    f"SM {cc} needs nvcc >= {need}, the JIT would use nvcc {nvcc} (RuntimeError 'SM 12.x requires CUDA >= 12.9')"
                )
    if problems:
        return Gate(
            id="flashinfer-jit", title=title, status="fail", reason="; ".join(problems), source=source
        )
    if warnings:
        return Gate(
            id="flashinfer-jit", title=title, status="warn", reason="; ".join(warnings), source=source
        )
    targets = f" (FLASHINFER_CUDA_ARCH_LIST={' '.join(arch_list)})" if arch_list else ""
    return Gate(
        id="flashinfer-jit",
        title=title,
        status="pass",
        source=source,
        reason=f"nvcc {nvcc} can build for {', '.join(sorted({g.sm or '' for g in facts.gpus}))}{targets}",
    )


def _arch_entry_covers(entry: str, cc: str) -> bool:
    match = re.match(r"^(\d+)\.(\d+)([af]?)$", entry)
    if not match:
        return False
    label = f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"
    return knowledge.label_runs_on(label, cc)


def machine_gates(facts: MachineFacts, versions: Versions | None = None) -> list[Gate]:
    """Gates decided by the GPUs and their topology, and by what the stack's versions do there (report/features.py)."""
    from provision.report import features

    return features.machine_gates(facts, versions or Versions(origin="stack"))


def report(
    machines: list[MachineFacts], profiles: list[Profile], uv_cache: Path | None = None
) -> list[MachineReport]:
    """Every machine against every profile (locks and environments: report/assemble.py adds them)."""
    return [MachineReport(facts=m, targets=tuple(judge(m, p, uv_cache) for p in profiles)) for m in machines]
