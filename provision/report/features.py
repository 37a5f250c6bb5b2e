"""The feature gates of the all-reduce paths: what to leave off and what to turn on on this machine, decided by the
GPUs and their topology and by what the versions of the stack judged do there (knowledge.toml [[feature_fact]]:
each fact with its version range and where it was read)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from provision import knowledge
from provision.machine.facts import MachineFacts
from provision.report.verdicts import Gate, Versions
from provision.status import Status

if TYPE_CHECKING:
    from provision.report import pcipath


def machine_gates(facts: MachineFacts, versions: Versions) -> list[Gate]:
    """Gates decided by the GPUs and their topology: all-reduce paths of SGLang, FlashInfer and NCCL."""
    gpus = facts.gpus
    if len(gpus) < 2:
        reason = "one GPU: no all-reduce across GPUs" if gpus else "no GPUs read"
        return [Gate(id="multi-gpu", title="all-reduce paths", status="skip", reason=reason, kind="feature")]
    majors = sorted({int(g.compute_capability.split(".")[0]) for g in gpus if g.compute_capability})
    from provision.report import pcipath

    # the ACS and IOMMU facts on the paths between the GPUs, read once for the gates
    found = pcipath.findings(facts)
    gates = [
        symm_mem(majors, facts.pcie_only, versions),
        fusion(majors, facts.pcie_only, versions),
        custom_allreduce(facts, found, versions),
        pcie_allreduce(facts, found, versions),
        p2p(facts, found),
    ]
    gates = [dataclasses.replace(g, kind="feature") for g in gates]
    tree = knowledge.gate("nccl_tree_graphs")
    gates.append(
        Gate(
            id="nccl-tree-graphs",
            title=tree["title"],
            status="info",
            source=tree["source"],
            kind="feature",
            reason="to try Tree with CUDA graphs set NCCL_ALGO='allreduce:tree' (per collective); a global Tree leaves other collectives no algorithm",
        )
    )
    graphs = knowledge.gate("cuda_graph_max_bs")
    gates.append(
        Gate(
            id="cuda-graph-max-bs",
            title=graphs["title"],
            status="info",
            source=graphs["source"],
            kind="feature",
            reason="fewer captured batch sizes save memory and capture time; measure with the baseline before and after",
        )
    )
    return gates


def _fact(gate: str, package: str, versions: Versions) -> tuple[dict[str, Any], str]:
    """The fact of `gate` for the stack's `package`, and how the reason names what it was judged by."""
    row, chosen = knowledge.feature_fact(gate, package, versions.of(package))
    said = (
        versions.named(package)
        if chosen
        else f"{versions.named(package)}, judged by the facts for {package} {row['versions']}"
    )
    return row, said


def symm_mem(majors: list[int], pcie: bool, versions: Versions) -> Gate:
    g = knowledge.gate("symm_mem_allreduce")
    fact, said = _fact("symm_mem_allreduce", "sglang", versions)
    source = fact["source"]
    unknown = [m for m in majors if m not in fact["arch_keys"]]
    if unknown:
        what = fact["on_other_sm"].format(major=unknown[0], version=versions.of("sglang") or "")
        return Gate(
            id="symm-mem-allreduce",
            title=g["title"],
            status="fail",
            source=source,
            reason=f"{what} [{said}]"
            + ("; and PCIe-only GPUs have no multicast, which it also needs" if pcie else ""),
        )
    if pcie:
        return Gate(
            id="symm-mem-allreduce",
            title=g["title"],
            status="fail",
            source=f"{source}; {g['source']}",
            reason="needs multicast (NVLink/NVSwitch); PCIe-only GPUs have multicast_ptr == 0: leave --enable-torch-symm-mem off",
        )
    return Gate(
        id="symm-mem-allreduce",
        title=g["title"],
        status="pass",
        source=source,
        reason=f"SM and fabric supported (--enable-torch-symm-mem) [{said}]",
    )


def fusion(majors: list[int], pcie: bool, versions: Versions) -> Gate:
    g = knowledge.gate("flashinfer_allreduce_fusion")
    flashinfer = versions.of("flashinfer-python")
    if flashinfer is None:
        return Gate(
            id="allreduce-fusion",
            title=g["title"],
            status="skip",
            reason=f"no FlashInfer in the {versions.origin}",
        )
    built, _ = knowledge.feature_fact("flashinfer_allreduce_fusion", "flashinfer-python", flashinfer)
    chosen, said = _fact("flashinfer_allreduce_fusion", "sglang", versions)
    source = f"{built['source']}; {chosen['source']}"
    missing = [m for m in majors if m not in built["build_majors"]]
    if missing:
        return Gate(
            id="allreduce-fusion",
            title=g["title"],
            status="fail",
            source=source,
            reason=f"FlashInfer {flashinfer} builds the fusion for SM majors {built['build_majors']}, not {missing[0]}: needs 0.6.17+",
        )
    flag = chosen["flag"] + (
        f" ({chosen['deprecated_flag']} is deprecated for it)" if chosen["deprecated_flag"] else ""
    )
    unused = [m for m in majors if chosen["select_majors"] and m not in chosen["select_majors"]]
    if unused:
        return Gate(
            id="allreduce-fusion",
            title=g["title"],
            status="fail",
            source=source,
            reason=f"compiles; SGLang will not use it: FlashInfer {flashinfer} builds it for SM{unused[0]}x, but {said} "
            f"selects the fusion on SM90 and SM100 only, and {flag} on SM{unused[0]}x raises "
            f'"{chosen["refusal"]}": leave it off',
        )
    if pcie:
        return Gate(
            id="allreduce-fusion",
            title=g["title"],
            status="warn",
            source=f"{source}; {g['source']}",
            reason=f"builds for this SM ({flag}), but assumes an NVLink or multicast fabric; over PCIe it is untested [{said}]",
        )
    return Gate(
        id="allreduce-fusion",
        title=g["title"],
        status="pass",
        source=source,
        reason=f"FlashInfer {flashinfer} builds it for SM majors {built['build_majors']}; {flag} [{said}]",
    )


def custom_allreduce(facts: MachineFacts, found: pcipath.Findings, versions: Versions) -> Gate:
    g = knowledge.gate("custom_allreduce")
    fact, said = _fact("custom_allreduce", "sglang", versions)
    count, pcie = len(facts.gpus), facts.pcie_only
    source = fact["source"]
    reasons: list[str] = []
    status: Status = "pass"
    if pcie and count > fact["max_pcie_world_size"]:
        status = "warn"
        reasons.append(
            f"disabled on more than {fact['max_pcie_world_size']} PCIe-only GPUs [{said}]: NCCL carries the all-reduce "
            "(Ring was 82 tok/s vs 38 for a custom all-reduce on the first machine)"
        )
    if found.problems:
        source = f"{source}; {knowledge.gate('pcie_p2p')['source']}"
        if found.via_iommu:
            status = "fail"
            reasons.append(
                f"its peer writes between GPUs {', '.join(found.via_iommu[:6])}{', ...' if len(found.via_iommu) > 6 else ''} "
                "go up to the root complex into a translated IOMMU, where they can be dropped or hang "
                "(vllm#51513, nccl#2079): leave it off (--disable-custom-all-reduce) until the p2p gate's "
                "changes are made"
            )
        elif found.redirecting:
            status = "warn"
            reasons.append(
                "its peer writes go through the root complex (ACS redirect, see the p2p gate): slower than "
                "a direct path; clear ACS redirect first"
            )
        else:
            status = "warn"
            reasons.append(
                "the IOMMU translates the GPUs' DMA (see the p2p gate): peer writes stay below the root "
                "complex while ACS redirects nothing, but any that reach it can be dropped"
            )
    if not reasons:
        reasons.append(f"{count} GPUs, {'PCIe' if pcie else 'NVLink'}")
    return Gate(
        id="custom-allreduce",
        title=g["title"],
        status=status,
        source=source or g["source"],
        reason="; ".join(reasons),
    )


def pcie_allreduce(facts: MachineFacts, found: pcipath.Findings, versions: Versions) -> Gate:
    """SGLang's PCIe all-reduce (FlashInfer's pcie_ipc_comm): for GPUs no NVLink joins, on one host; off by default."""
    title = knowledge.gate("pcie_allreduce")["title"]
    newest, _ = knowledge.feature_fact("pcie_allreduce", "sglang", "999")
    switch = f"{newest['variable']}=1"
    sglang, said = _fact("pcie_allreduce", "sglang", versions)
    kernels, _ = knowledge.feature_fact(
        "pcie_allreduce", "flashinfer-python", versions.of("flashinfer-python")
    )
    source = f"{sglang['source']}; {kernels['source']}"
    if not facts.pcie_only:
        return Gate(
            id="pcie-allreduce",
            title=title,
            status="skip",
            source=newest["source"],
            reason="NVLink joins these GPUs: the PCIe all-reduce is for hosts whose GPUs meet only over PCIe",
        )
    if not sglang["available"]:
        return Gate(
            id="pcie-allreduce",
            title=title,
            status="skip",
            source=source,
            reason=f"not in this stack [{said}]: SGLang {newest['versions']} with FlashInfer >= 0.7.1 has it ({switch})",
        )
    if not kernels["available"]:
        return Gate(
            id="pcie-allreduce",
            title=title,
            status="skip",
            source=source,
            reason=f"{switch} would fall back to NCCL: {versions.named('flashinfer-python')} has no pcie_ipc_comm (FlashInfer >= 0.7.1 has)",
        )
    sizes = [str(s) for s in sglang["world_sizes"] if s <= len(facts.gpus)]
    if not sizes:
        return Gate(
            id="pcie-allreduce",
            title=title,
            status="skip",
            source=source,
            reason=f"TP {', '.join(map(str, sglang['world_sizes']))} only; this machine has {len(facts.gpus)} GPUs",
        )
    how = (
        f"{switch} [{said}, {versions.named('flashinfer-python')}]: TP {', '.join(sizes)} on these {len(facts.gpus)} "
        f"PCIe-only GPUs, {sglang['dtype']} only, off under --enable-deterministic-inference, a decode-sized workspace "
        f"({sglang['max_numel_variable']} overrides), tuned per host by FlashInfer's autotuner (its cache lies under "
        f"FLASHINFER_WORKSPACE_BASE, or FLASHINFER_AUTOTUNE_DIR); {sglang['measured']}"
    )
    if found.via_iommu:
        return Gate(
            id="pcie-allreduce",
            title=title,
            status="warn",
            source=f"{source}; {knowledge.gate('pcie_p2p')['source']}",
            reason=f"its peer writes between GPUs {', '.join(found.via_iommu[:6])} reach a translated IOMMU (see the p2p gate): "
            f"make the p2p gate's changes first, then turn it on with {how}",
        )
    return Gate(
        id="pcie-allreduce",
        title=title,
        status="pass",
        source=source,
        turn_on=switch,
        reason=f"turn on with {how}",
    )


def p2p(facts: MachineFacts, found: pcipath.Findings) -> Gate:
    bad = [f"{link.gpu_a}-{link.gpu_b} ({link.p2p_read})" for link in facts.topology if link.p2p_read != "ok"]
    title = "peer-to-peer reads between every pair"
    source = "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html (nvmlDeviceGetP2PStatus, READ); symmetric memory and custom all-reduce need P2P"
    problems = list(found.problems)
    if problems:
        source = f"{source}; {knowledge.gate('pcie_p2p')['source']}"
    if bad:
        why = (
            ""
            if problems
            else (
                ": the ACS bits and IOMMU read here show no cause"
                if found.read and not found.unread
                else ": check ACS/IOMMU (nccl#606, #2079)"
            )
        )
        problems.insert(
            0, f"NVML reports no P2P for {', '.join(bad[:6])}{'...' if len(bad) > 6 else ''}{why}"
        )
    if problems:
        return Gate(id="p2p", title=title, status="warn", source=source, reason="; ".join(problems))
    unread = (
        f"; the ACS bits of {len(found.unread)} bridge(s) on the way need root to read (sudo provision probe)"
        if found.unread
        else ""
    )
    return Gate(
        id="p2p", title=title, status="pass", source=source, reason=f"all {len(facts.topology)} pairs{unread}"
    )


def newer_than_known(versions: Versions) -> Gate | None:
    """A WARN when the stack holds a release newer than any the knowledge has facts for: which rules judged it."""
    newer = []
    for row in knowledge.tables()["newest_known"]:
        have = versions.of(row["package"])
        if (
            have
            and knowledge.version_at_least(have, row["version"])
            and not knowledge.version_at_least(row["version"], have)
        ):
            newer.append(
                f"{row['package']} {have} is newer than {row['version']}, the newest the knowledge has facts for"
            )
    if not newer:
        return None
    return Gate(
        id="knowledge",
        title=f"the knowledge knows this stack (knowledge as of {knowledge.as_of()})",
        status="warn",
        source="provision/knowledge.toml [[newest_known]], [[feature_fact]]",
        reason="; ".join(newer) + ": its feature gates were judged by the newest facts known "
        "(the rows whose range holds it); check them against its release notes",
    )
