"""Recipes for `provision try NAME --recipe ID`: the first user's approaches to SGLang's all-reduce and today's levers,
each a change a trial makes. Its SGLang flags and variables are never taken on trust: each recipe lists its spellings
newest first, and the first whose every flag is in the parser of the SGLang installed in NAME and every variable in
its environment table (commands/sglang_source.py) is the one used (0.5.23 renamed the fusion flag and split
--cuda-graph-max-bs). NCCL's own variables are NCCL's (its documentation), not SGLang's. Whether a recipe can run on
this machine is what `provision report` knows (report/gates.py: the SM, the GPUs, PCIe or NVLink)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from provision.commands.sglang_source import SglangSource
from provision.envs.ledger import Change
from provision.errors import UsageError
from provision.machine.facts import MachineFacts

NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@dataclass(frozen=True, kw_only=True)
class Spelling:
    """One way to write the recipe, in the SGLang releases whose parser and table have it."""

    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # SGLang's variables (srt/environ.py)

    @property
    def flags(self) -> list[str]:
        return [a for a in self.args if a.startswith("--")]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    id: str
    title: str
    spellings: tuple[Spelling, ...]
    nccl_env: tuple[tuple[str, str], ...] = ()  # NCCL's own variables: not read from SGLang
    gate: str | None = None  # the report gate (report/gates.py) whose FAIL makes it not applicable here
    multi_gpu: bool = True  # an all-reduce recipe: nothing to change on one GPU
    pcie_only: bool = False
    source: str = ""


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        id="custom-allreduce-pcie",
        gate="custom-allreduce",
        title="custom all-reduce on PCIe against NCCL: --disable-custom-all-reduce (better: NCCL beats SGLang's own)",
        spellings=(Spelling(args=("--disable-custom-all-reduce",)),),
        source="sglang srt/distributed/device_communicators/custom_all_reduce.py; the first user: 38 tok/s vs 82 with NCCL",
    ),
    Recipe(
        id="flashinfer-allreduce-fusion",
        gate="allreduce-fusion",
        title="FlashInfer all-reduce fusion with residual RMSNorm",
        spellings=(
            Spelling(args=("--flashinfer-allreduce-fusion-backend", "auto")),
            Spelling(args=("--enable-flashinfer-allreduce-fusion",)),
        ),
        source="sglang srt/layers/flashinfer_comm_fusion.py; 0.5.23 deprecates --enable-flashinfer-allreduce-fusion",
    ),
    Recipe(
        id="torch-symm-mem",
        gate="symm-mem-allreduce",
        title="torch symmetric memory all-reduce",
        spellings=(Spelling(args=("--enable-torch-symm-mem",)),),
        source="sglang srt/distributed/device_communicators/torch_symm_mem.py",
    ),
    Recipe(
        id="nccl-tree-graphs",
        gate="nccl-tree-graphs",
        title="NCCL Tree for all-reduce, with SGLang's CUDA graphs",
        spellings=(Spelling(),),
        nccl_env=(("NCCL_ALGO", "allreduce:tree"),),
        source=NCCL_DOCS + " (NCCL_ALGO)",
    ),
    Recipe(
        id="nccl-fewer-channels",
        title="fewer NCCL channels (NCCL_MAX_NCHANNELS=4)",
        spellings=(Spelling(),),
        nccl_env=(("NCCL_MAX_NCHANNELS", "4"),),
        source=NCCL_DOCS + " (NCCL_MAX_NCHANNELS)",
    ),
    Recipe(
        id="cuda-graph-max-bs",
        title="a smaller largest CUDA-graph batch (64)",
        multi_gpu=False,
        spellings=(
            Spelling(args=("--cuda-graph-max-bs-decode", "64")),
            Spelling(args=("--cuda-graph-max-bs", "64")),
        ),
        source="sglang srt/arg_groups/fields/exec_.py (0.5.23: --cuda-graph-max-bs-decode); srt/server_args.py before",
    ),
    Recipe(
        id="pcie-ipc-allreduce",
        pcie_only=True,
        title="SGLang 0.5.23's PCIe IPC all-reduce (FlashInfer pcie_ipc_comm; TP 2/4/8, bf16)",
        spellings=(Spelling(env=(("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "1"),)),),
        source="sglang srt/distributed/device_communicators/pcie_ipc_ar.py (sgl-project/sglang#34528)",
    ),
)
BY_ID = {recipe.id: recipe for recipe in RECIPES}


@dataclass(frozen=True, kw_only=True)
class Fit:
    """A recipe on one environment and machine: the change it makes there, or why it does not apply."""

    recipe: Recipe
    change: Change | None  # None: no spelling of it is in this SGLang
    reason: str  # why it does not apply; what it is, where it does
    applies: bool
    gate_reason: str | None = None  # report's reason it cannot run here (it runs with --force)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.recipe.id,
            "title": self.recipe.title,
            "applies": self.applies,
            "reason": self.reason,
            "change": self.change.to_dict() if self.change else None,
            "source": self.recipe.source,
        }


def find(recipe_id: str) -> Recipe:
    if recipe_id not in BY_ID:
        raise UsageError(
            f"no recipe {recipe_id!r}", f"known: {', '.join(BY_ID)} (provision try --list-recipes NAME)"
        )
    return BY_ID[recipe_id]


def fit(recipe: Recipe, sglang: SglangSource | None, facts: MachineFacts, flashinfer: str | None) -> Fit:
    """Which spelling of `recipe` the installed SGLang takes, and whether report's gates let it run here."""
    if sglang is None:
        return Fit(
            recipe=recipe, change=None, applies=False, reason="SGLang is not installed in this environment"
        )
    missing: list[str] = []
    for spelling in recipe.spellings:
        absent = [f"flag {f}" for f in spelling.flags if f not in sglang.flags]
        absent += [
            f"variable {k}" + ("" if sglang.variables is not None else " (no srt/environ.py)")
            for k, _ in spelling.env
            if sglang.variables is None or k not in sglang.variables
        ]
        if not absent:
            change = Change(env={**dict(recipe.nccl_env), **dict(spelling.env)}, args=list(spelling.args))
            why = _gate_reason(recipe, facts, flashinfer, str(sglang.version))
            return Fit(
                recipe=recipe,
                change=change,
                applies=why is None,
                gate_reason=why,
                reason=why or f"sglang {sglang.version}: {change.text()}",
            )
        missing += absent
    return Fit(
        recipe=recipe,
        change=None,
        applies=False,
        reason=f"sglang {sglang.version} has no {' and no '.join(dict.fromkeys(missing))} (absent in this version)",
    )


def _gate_reason(
    recipe: Recipe, facts: MachineFacts, flashinfer: str | None, sglang: str | None = None
) -> str | None:
    """Report's reason `recipe` cannot run on this machine, else None (judged by the environment's versions)."""
    from provision.report.gates import Versions, machine_gates

    found = {name: v for name, v in (("flashinfer-python", flashinfer), ("sglang", sglang)) if v}
    gates = {g.id: g for g in machine_gates(facts, Versions(found=found, origin="environment"))}
    if recipe.multi_gpu and "multi-gpu" in gates:
        return f"report: {gates['multi-gpu'].reason}"
    gate = gates.get(recipe.gate or "")
    if gate is not None and gate.status == "fail":
        return f"report ({gate.id}): {gate.reason}"
    if recipe.pcie_only and not facts.pcie_only:
        return (
            "report: these GPUs are joined by NVLink; the PCIe IPC all-reduce is for switch-free PCIe hosts"
        )
    return None


def fits(venv: Path, sglang: SglangSource | None, facts: MachineFacts) -> list[Fit]:
    """Every recipe on the environment whose venv is `venv`, on the machine of `facts`."""
    from provision.report.environments import installed

    flashinfer = installed(venv).get("flashinfer-python")
    return [fit(recipe, sglang, facts, flashinfer) for recipe in RECIPES]
