"""`provision report`: the machine against each profile and environment, one verdict per gate, each with its source."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from provision import knowledge
from provision import status as statuses
from provision.machine.facts import MachineFacts
from provision.stacks.profiles import Profile
from provision.status import Status

if TYPE_CHECKING:
    from provision.envs.records import KeptFile
    from provision.report import pcipath
    from provision.report.lockscan import JudgedWheel

TOOLKIT_SOURCE = "nvcc --list-gpu-code (https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/); provision/knowledge.toml [[toolkit]]"


@dataclass(frozen=True, kw_only=True)
class Gate:
    id: str
    title: str
    status: Status  # pass, warn, fail, skip, info
    reason: str
    source: str = ""
    kind: str = "stack"  # "stack" gates decide the verdict; "feature" gates say what to leave off


@dataclass(frozen=True, kw_only=True)
class Target:
    kind: str  # "profile", "lock" or "environment"
    name: str
    cuda: str
    gates: tuple[Gate, ...] = ()
    packages: tuple[JudgedWheel, ...] | None = None  # a lock's CUDA wheels: the SMs found and a verdict per GPU
    kept_files: tuple[KeptFile, ...] | None = None  # an environment's accepted and profile files

    @property
    def verdict(self) -> Status:
        # an info gate says something without judging: it never makes a verdict
        return statuses.worst(g.status for g in self.gates if g.kind == "stack" and g.status != "info") or "skip"

    @property
    def features_off(self) -> list[str]:
        return [g.id for g in self.gates if g.kind == "feature" and g.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "cuda": self.cuda, "verdict": self.verdict,
                "features_off": self.features_off, "gates": [dataclasses.asdict(g) for g in self.gates],
                **({"packages": [p.to_dict() for p in self.packages]} if self.packages is not None else {}),
                **({"kept_files": [{**k.to_dict(), "origin": k.origin} for k in self.kept_files]}
                   if self.kept_files is not None else {})}


@dataclass(frozen=True, kw_only=True)
class MachineReport:
    """One machine judged: its facts and a target per profile, lock and environment, in that order."""

    facts: MachineFacts
    targets: tuple[Target, ...]

    def to_dict(self) -> dict[str, Any]:
        f = self.facts
        return {
            "source": f.source,
            "driver": f.driver.version,
            "driver_cuda": f.driver.cuda,
            "gpus": [{"index": g.index, "name": g.name, "sm": g.sm} for g in f.gpus],
            "pcie_only": f.pcie_only if len(f.gpus) > 1 else None,
            "toolkits": [t.version for t in f.toolkits],
            "targets": [t.to_dict() for t in self.targets],
        }


def load_machine(path: Path) -> MachineFacts:
    """The facts of a recorded probe document (checked key by key: provision/report/documents.py)."""
    from provision.report import documents

    return documents.load_machine(path)


def judge(facts: MachineFacts, profile: Profile, uv_cache: Path | None = None) -> Target:
    """The profile's gates on this machine; `uv_cache` is where to look for its compiler wheel (never downloaded)."""
    return Target(kind="profile", name=profile.name, cuda=profile.cuda, gates=(
        driver_gate(facts, profile.cuda),
        _toolkit(facts, profile, uv_cache),
        torch_wheels(facts, profile.cuda, has_torch=profile.bound_index("torch") is not None),
        _flashinfer_jit(facts, profile),
        *machine_gates(facts, flashinfer_version(profile)),
    ))


def driver_gate(facts: MachineFacts, cuda: str) -> Gate:
    title = f"driver supports CUDA {cuda}"
    source = knowledge.driver_source(cuda)
    start = facts.driver.nvml
    if start.silent:  # installed, not answering: no GPU of it can run this stack until it does
        return Gate(id="driver", title=title, status="fail", source=source,
                    reason=f"the NVIDIA driver does not answer ({start.state}): {start.reason}; {start.hint}")
    if facts.driver.cuda is None:
        return Gate(id="driver", title=title, status="skip", reason="no NVIDIA driver read on this machine", source=source)
    if knowledge.driver_supports(facts.driver.cuda, cuda):
        return Gate(id="driver", title=title, status="pass", source=source,
                    reason=f"driver {facts.driver.version} supports CUDA up to {facts.driver.cuda}")
    minimum = knowledge.driver_minimum(cuda)
    need = f"a driver >= {minimum}" if minimum else f"a driver that supports CUDA {cuda}"
    return Gate(id="driver", title=title, status="fail", source=source,
                reason=f"driver {facts.driver.version} supports CUDA up to {facts.driver.cuda}; install {need}")


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
        options.append((f"the profile's own {found.name}" if found else f"the profile's own nvcc {own} (not tabled)",
                        list(found.sms) if found else [], found.source if found else TOOLKIT_SOURCE))
    options += [(f"nvcc {t.full_version or t.version} at {t.path}", list(t.sms), TOOLKIT_SOURCE) for t in facts.toolkits]
    sms = sorted({g.sm for g in facts.gpus if g.sm})
    for name, targets, source in options:
        if all(sm in targets for sm in sms):
            return Gate(id="toolkit", title=title, status="pass", reason=f"{name} targets {', '.join(sms)}", source=source)
    if not options:
        return Gate(id="toolkit", title=title, status="warn", reason="no CUDA toolkit found and the profile brings none; JIT builds (FlashInfer) cannot run",
                    source=TOOLKIT_SOURCE)
    return Gate(id="toolkit", title=title, status="fail", source=TOOLKIT_SOURCE,
                reason=f"no compiler targets {', '.join(sms)}: {'; '.join(n for n, _, _ in options)}")


def torch_wheels(facts: MachineFacts, cuda: str, *, has_torch: bool = True, scanned: dict[str, int] | None = None,
                 wheel: str = "") -> Gate:
    """Whether PyTorch's wheels carry code for every GPU: from the scanned torch wheel (`scanned` cubin labels) when
    there is one, else from the table of PyTorch's arch list (the fallback, which says so)."""
    title = f"PyTorch cu{cuda.replace('.', '')} wheels carry code for every GPU" if cuda != "?" else "PyTorch wheels carry code for every GPU"
    if not has_torch:
        return Gate(id="torch-wheels", title=title, status="skip", reason="the profile has no torch")
    if not facts.gpus:
        return Gate(id="torch-wheels", title=title, status="skip", reason="no GPUs read")
    if scanned is not None:
        sms, source, what = sorted(scanned, key=_label_key), "fatbin entry headers of the wheel (docs/fatbin.md)", f"the scanned wheel {wheel} carries"
    else:
        sms = knowledge.torch_wheel_sms(cuda) or []
        source = next((r["source"] for r in knowledge.tables()["torch_wheels"] if r["cuda"] == cuda), "")
        what = "from the table (provision/knowledge.toml [[torch_wheels]], no torch wheel scanned): official wheels carry"
        if not sms:
            return Gate(id="torch-wheels", title=title, status="skip",
                        reason=f"no torch wheel scanned and no table of PyTorch's arch list for CUDA {cuda}: run provision report --lock")
    missing = sorted({g.sm or "" for g in facts.gpus if g.compute_capability and not any(
        knowledge.label_runs_on(s, g.compute_capability) for s in sms)})
    if missing:
        return Gate(id="torch-wheels", title=title, status="fail", source=source,
                    reason=f"{what} {' '.join(sms) or 'no cubin'}: nothing for {', '.join(missing)} ('no kernel image')")
    return Gate(id="torch-wheels", title=title, status="pass", source=source, reason=f"{what} {' '.join(sms)}")


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
            bounds = [Version(s.version) for s in SpecifierSet(package.version) if s.operator in ("==", ">=", "~=")]
            return min(bounds) if bounds else Version("0")
    return None


def _flashinfer_jit(facts: MachineFacts, profile: Profile) -> Gate:
    gate = knowledge.gate("flashinfer_jit")
    title, source = gate["title"], gate["source"]
    if flashinfer_version(profile) is None:
        return Gate(id="flashinfer-jit", title=title, status="skip", reason="the profile has no FlashInfer")
    if not facts.gpus:
        return Gate(id="flashinfer-jit", title=title, status="skip", reason="no GPUs read")
    nvcc = own_toolkit(profile) or max((t.version for t in facts.toolkits), key=Version, default=None) or profile.cuda
    ccs = [g.compute_capability for g in facts.gpus if g.compute_capability]
    # {arch_list} is filled from this machine's GPUs, as create and check fill it (the same nvcc decides a/f)
    arch_list = profile.env.get("FLASHINFER_CUDA_ARCH_LIST", "").replace(
        "{arch_list}", knowledge.flashinfer_arch_list(ccs, nvcc)).split()
    problems, warnings = [], []
    for cc in sorted({g.compute_capability for g in facts.gpus if g.compute_capability}):
        major = cc.split(".")[0]
        need = gate["min_nvcc_for_major"].get(major)
        covered = [a for a in arch_list if _arch_entry_covers(a, cc)]
        if arch_list and not covered:
            problems.append(f"the profile's FLASHINFER_CUDA_ARCH_LIST={' '.join(arch_list)} has nothing for {knowledge.sm_name(cc)}: "
                            "JIT modules would carry no code for this GPU (set it for this GPU, or leave it unset to detect)")
        if need and not knowledge.version_at_least(nvcc, need):
            if covered and all(a.endswith("a") for a in covered):
                warnings.append(f"nvcc {nvcc} < {need}: SM{major}x only through the '{covered[0]}' workaround")
            else:
                problems.append(f"SM {cc} needs nvcc >= {need}, the JIT would use nvcc {nvcc} (RuntimeError 'SM 12.x requires CUDA >= 12.9')")
    if problems:
        return Gate(id="flashinfer-jit", title=title, status="fail", reason="; ".join(problems), source=source)
    if warnings:
        return Gate(id="flashinfer-jit", title=title, status="warn", reason="; ".join(warnings), source=source)
    targets = f" (FLASHINFER_CUDA_ARCH_LIST={' '.join(arch_list)})" if arch_list else ""
    return Gate(id="flashinfer-jit", title=title, status="pass", source=source,
                reason=f"nvcc {nvcc} can build for {', '.join(sorted({g.sm or '' for g in facts.gpus}))}{targets}")


def _arch_entry_covers(entry: str, cc: str) -> bool:
    match = re.match(r"^(\d+)\.(\d+)([af]?)$", entry)
    if not match:
        return False
    label = f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"
    return knowledge.label_runs_on(label, cc)


def machine_gates(facts: MachineFacts, flashinfer: Version | None) -> list[Gate]:
    """Gates decided by the GPUs and their topology: all-reduce paths of SGLang, FlashInfer and NCCL."""
    gpus = facts.gpus
    if len(gpus) < 2:
        reason = "one GPU: no all-reduce across GPUs" if gpus else "no GPUs read"
        return [Gate(id="multi-gpu", title="all-reduce paths", status="skip", reason=reason, kind="feature")]
    majors = {int(g.compute_capability.split(".")[0]) for g in gpus if g.compute_capability}
    pcie = facts.pcie_only
    from provision.report import pcipath

    found = pcipath.findings(facts)  # the ACS and IOMMU facts on the paths between the GPUs, read once for both gates
    gates = [_symm_mem(majors, pcie), _fusion(majors, pcie, flashinfer), _custom_allreduce(facts, found), _p2p(facts, found)]
    gates = [dataclasses.replace(g, kind="feature") for g in gates]
    tree = knowledge.gate("nccl_tree_graphs")
    gates.append(Gate(id="nccl-tree-graphs", title=tree["title"], status="info", source=tree["source"], kind="feature",
                      reason="to try Tree with CUDA graphs set NCCL_ALGO='allreduce:tree' (per collective); a global Tree leaves other collectives no algorithm"))
    graphs = knowledge.gate("cuda_graph_max_bs")
    gates.append(Gate(id="cuda-graph-max-bs", title=graphs["title"], status="info", source=graphs["source"], kind="feature",
                      reason="fewer captured batch sizes save memory and capture time; measure with the baseline before and after"))
    return gates


def _symm_mem(majors: set[int], pcie: bool) -> Gate:
    g = knowledge.gate("symm_mem_allreduce")
    unknown = sorted(m for m in majors if m not in g["arch_keys"])
    if unknown:
        return Gate(id="symm-mem-allreduce", title=g["title"], status="fail", source=g["source"],
                    reason=f"SGLang's size table has keys {g['arch_keys']}: --enable-torch-symm-mem dies with KeyError: {unknown[0]} (fixed by PR #24548: disabled cleanly)"
                    + ("; and PCIe-only GPUs have no multicast, which it also needs" if pcie else ""))
    if pcie:
        return Gate(id="symm-mem-allreduce", title=g["title"], status="fail", source=g["source"],
                    reason="needs multicast (NVLink/NVSwitch); PCIe-only GPUs have multicast_ptr == 0: leave --enable-torch-symm-mem off")
    return Gate(id="symm-mem-allreduce", title=g["title"], status="pass", source=g["source"], reason="SM and fabric supported")


def _fusion(majors: set[int], pcie: bool, flashinfer: Version | None) -> Gate:
    g = knowledge.gate("flashinfer_allreduce_fusion")
    if flashinfer is None:
        return Gate(id="allreduce-fusion", title=g["title"], status="skip", reason="no FlashInfer in this profile")
    supported = g["majors_from_0_6_17"] if flashinfer >= Version("0.6.17") else g["majors_before_0_6_17"]
    missing = sorted(m for m in majors if m not in supported)
    if missing:
        return Gate(id="allreduce-fusion", title=g["title"], status="fail", source=g["source"],
                    reason=f"FlashInfer {flashinfer} builds the fusion for SM majors {supported}, not {missing[0]}: needs 0.6.17+")
    if pcie:
        return Gate(id="allreduce-fusion", title=g["title"], status="warn", source=g["source"],
                    reason="builds for this SM, but assumes an NVLink or multicast fabric; over PCIe it is untested")
    return Gate(id="allreduce-fusion", title=g["title"], status="pass", source=g["source"], reason=f"FlashInfer {flashinfer} supports SM majors {supported}")


def _custom_allreduce(facts: MachineFacts, found: pcipath.Findings) -> Gate:
    g = knowledge.gate("custom_allreduce")
    count, pcie = len(facts.gpus), facts.pcie_only
    source = g["source"]
    reasons: list[str] = []
    status: Status = "pass"
    if pcie and count > g["max_pcie_world_size"]:
        status = "warn"
        reasons.append(f"disabled on more than {g['max_pcie_world_size']} PCIe-only GPUs: NCCL carries the all-reduce "
                       "(Ring was 82 tok/s vs 38 for a custom all-reduce on the first machine)")
    if found.problems:
        source = f"{source}; {knowledge.gate('pcie_p2p')['source']}"
        if found.via_iommu:
            status = "fail"
            reasons.append(f"its peer writes between GPUs {', '.join(found.via_iommu[:6])}{', ...' if len(found.via_iommu) > 6 else ''} "
                           "go up to the root complex into a translated IOMMU, where they can be dropped or hang "
                           "(vllm#51513, nccl#2079): leave it off (--disable-custom-all-reduce) until the p2p gate's "
                           "changes are made")
        elif found.redirecting:
            status = "warn"
            reasons.append("its peer writes go through the root complex (ACS redirect, see the p2p gate): slower than "
                           "a direct path; clear ACS redirect first")
        else:
            status = "warn"
            reasons.append("the IOMMU translates the GPUs' DMA (see the p2p gate): peer writes stay below the root "
                           "complex while ACS redirects nothing, but any that reach it can be dropped")
    if not reasons:
        reasons.append(f"{count} GPUs, {'PCIe' if pcie else 'NVLink'}")
    return Gate(id="custom-allreduce", title=g["title"], status=status, source=source, reason="; ".join(reasons))


def _p2p(facts: MachineFacts, found: pcipath.Findings) -> Gate:
    bad = [f"{link.gpu_a}-{link.gpu_b} ({link.p2p_read})" for link in facts.topology if link.p2p_read != "ok"]
    title = "peer-to-peer reads between every pair"
    source = "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html (nvmlDeviceGetP2PStatus, READ); symmetric memory and custom all-reduce need P2P"
    problems = list(found.problems)
    if problems:
        source = f"{source}; {knowledge.gate('pcie_p2p')['source']}"
    if bad:
        why = "" if problems else (": the ACS bits and IOMMU read here show no cause" if found.read and not found.unread
                                   else ": check ACS/IOMMU (nccl#606, #2079)")
        problems.insert(0, f"NVML reports no P2P for {', '.join(bad[:6])}{'...' if len(bad) > 6 else ''}{why}")
    if problems:
        return Gate(id="p2p", title=title, status="warn", source=source, reason="; ".join(problems))
    unread = (f"; the ACS bits of {len(found.unread)} bridge(s) on the way need root to read (sudo provision probe)"
              if found.unread else "")
    return Gate(id="p2p", title=title, status="pass", source=source, reason=f"all {len(facts.topology)} pairs{unread}")


def report(machines: list[MachineFacts], profiles: list[Profile], uv_cache: Path | None = None) -> list[MachineReport]:
    """Every machine against every profile (locks and environments: report/assemble.py adds them)."""
    return [MachineReport(facts=m, targets=tuple(judge(m, p, uv_cache) for p in profiles)) for m in machines]
