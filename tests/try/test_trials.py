"""`provision trials` and `provision try NEW --replay OLD` across two environments (the matrix), and the recipes read
from the SGLang installed in an environment: two small sglang wheels from the tests' index whose server_args.py,
arg_groups/fields/ and environ.py have the real releases' shapes (0.5.9: every flag an add_argument call, no
environment table; 0.5.23: the parser's fields annotated records, the fusion flag renamed, --cuda-graph-max-bs split,
the PCIe IPC all-reduce in srt/environ.py), and, marked `network`, the real SGLang 0.5.23 wheel alone."""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path

import pytest
import tiny
from conftest import DATA
from test_try import tool_with_baseline, tried

SERVER_ARGS_0_5_9 = """
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    cuda_graph_max_bs: int | None = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--cuda-graph-max-bs", type=int, default=ServerArgs.cuda_graph_max_bs)
        parser.add_argument("--disable-custom-all-reduce", action="store_true")
        parser.add_argument("--enable-torch-symm-mem", action="store_true")
        parser.add_argument("--enable-flashinfer-allreduce-fusion", action="store_true")
"""

SERVER_ARGS_0_5_23 = """
import argparse

from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
from sglang.srt.arg_groups.argparse_actions import DeprecatedStoreTrueAction
from sglang.srt.arg_groups.fields.exec_ import ExecArgs


class ServerArgs(ExecArgs):
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--disable-cuda-graph", action=DeprecatedStoreTrueAction,
                            new_flag="--cuda-graph-backend-{decode,prefill}=disabled")
        parser.add_argument("--enable-flashinfer-allreduce-fusion", action="store_true",
                            help="(Deprecated: use --flashinfer-allreduce-fusion-backend=auto)")
"""

FIELDS_0_5_23 = """
from __future__ import annotations

import dataclasses
from typing import Literal, Optional

from sglang.srt.arg_groups.arg_utils import A, Arg


@dataclasses.dataclass
class ExecArgs:
    cuda_graph_max_bs_decode: A[Optional[int], "Maximum batch size captured for the decode cuda graph."] = None
    disable_custom_all_reduce: A[bool, Arg(help="Disable the custom all-reduce kernel.", resolvable=True)] = False
    enable_torch_symm_mem: A[bool, "Enable using torch symm mem for all-reduce kernel and fall back to NCCL."] = False
    enable_flashinfer_allreduce_fusion: A[bool, Arg(no_cli=True)] = False
    flashinfer_allreduce_fusion_backend: A[
        Optional[Literal["auto", "trtllm", "mnnvl", "cutedsl"]],
        Arg(help="Enable FlashInfer allreduce fusion and choose backend."),
    ] = None
    tp_size: A[int, Arg(help="The tensor parallelism size.", cli_name="--tp-size", aliases=["--tensor-parallel-size"])] = 1
"""

ENVIRON_0_5_23 = """
class EnvField:
    def __init__(self, default):
        self.default = default


class EnvBool(EnvField):
    pass


class EnvInt(EnvField):
    pass


class Envs:
    SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = EnvInt(16 * 1024)
    SGLANG_ENABLE_PCIE_IPC_ALLREDUCE = EnvBool(False)
    SGLANG_PCIE_IPC_MAX_NUMEL = EnvInt(0)


envs = Envs()
"""


def sglang_wheels(index) -> None:
    """sglang 0.5.9 and 0.5.23 as the tests' index serves them: the files the recipes are read from, in their shapes,
    and the server's entry point the imports check imports (empty)."""
    entry = {
        "sglang/launch_server.py": b"",
        "sglang/srt/entrypoints/__init__.py": b"",
        "sglang/srt/entrypoints/http_server.py": b"",
        "sglang/srt/__init__.py": b"",
    }
    index.add(
        "sglang",
        "0.5.9",
        files={
            **entry,
            "sglang/__init__.py": b"__version__ = '0.5.9'\n",
            "sglang/srt/server_args.py": SERVER_ARGS_0_5_9.encode(),
        },
    )
    index.add(
        "sglang",
        "0.5.23",
        files={
            **entry,
            "sglang/__init__.py": b"__version__ = '0.5.23'\n",
            "sglang/srt/server_args.py": SERVER_ARGS_0_5_23.encode(),
            "sglang/srt/arg_groups/__init__.py": b"",
            "sglang/srt/arg_groups/fields/__init__.py": b"",
            "sglang/srt/arg_groups/fields/exec_.py": FIELDS_0_5_23.encode(),
            "sglang/srt/environ.py": ENVIRON_0_5_23.encode(),
        },
    )


def two_stacks(tmp_path: Path, index_server, provision_bin: str) -> tiny.Tool:
    """cu128 (sglang 0.5.9) and cu130 (sglang 0.5.23) with the baseline of test_try, where a smaller CUDA-graph batch
    helps on the first and hurts on the second."""
    sglang_wheels(tiny.index(index_server))
    tool, _ = tool_with_baseline(
        tmp_path,
        index_server,
        provision_bin,
        "cu128",
        packages='alpha = "==1.0"\nsglang = "==0.5.9"',
        env={"TRY_GRAPHS": "1.1"},
    )
    tool_with_baseline(
        tmp_path,
        index_server,
        provision_bin,
        "cu130",
        packages='alpha = "==1.0"\nsglang = "==0.5.23"',
        env={"TRY_GRAPHS": "0.85"},
    )
    return tool


@pytest.mark.slow
def test_replay_on_a_second_environment_and_the_matrix(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = two_stacks(tmp_path, index_server, provision_bin)
    patched = tmp_path / "patched.py"
    patched.write_text("FACTOR = 0.5\n")
    tried(tool, "cu128", "faster", "--env", "TRY_FACTOR=1.2")
    graphs = tried(tool, "cu128", "--recipe", "cuda-graph-max-bs")
    assert graphs["label"] == "cuda-graph-max-bs" and graphs["recipe"] == "cuda-graph-max-bs"
    # 0.5.9's flag
    assert graphs["change"]["args"] == ["--cuda-graph-max-bs", "64"] and graphs["verdict"] == "better"
    tried(tool, "cu128", "patched", "--file", f"alpha/__init__.py={patched}")
    patched.unlink()  # the replay writes the content the ledger kept, not whatever the source says today

    done = tool("try", "cu130", "--replay", "cu128", "--runs", "3", "--json")
    replayed = json.loads(done.stdout)
    assert replayed["name"] == "cu130" and replayed["replayed_from"] == "cu128"
    assert [t["label"] for t in replayed["trials"]] == ["faster", "cuda-graph-max-bs", "patched"]
    faster, graphs_new, file_new = replayed["trials"]
    assert faster["verdict"] == "better" and faster["change"]["env"] == {"TRY_FACTOR": "1.2"}
    # read again from 0.5.23's parser
    assert graphs_new["change"]["args"] == [
        "--cuda-graph-max-bs-decode",
        "64",
    ]
    assert graphs_new["verdict"] == "worse" and -16 < graphs_new["change_pct"] < -14
    assert file_new["verdict"] == "worse" and file_new["restored"] is True
    site = next((Path(tool.envs()["cu130"]["path"]) / "venv").glob("lib/python3*/site-packages"))
    assert "FACTOR" not in (site / "alpha" / "__init__.py").read_text()

    ledger = json.loads(tool("trials", "--json").stdout)
    assert [(t["name"], t["label"]) for t in ledger["trials"]] == [
        ("cu128", "faster"),
        ("cu128", "cuda-graph-max-bs"),
        ("cu128", "patched"),
        ("cu130", "faster"),
        ("cu130", "cuda-graph-max-bs"),
        ("cu130", "patched"),
    ]
    matrix = tool("trials", "cu128", "cu130", env={"COLUMNS": "250"}).stdout
    row = next(
        line for line in matrix.splitlines() if line.startswith("│ cuda-graph-max-bs ") and "better" in line
    )
    assert "worse -15.2%" in row and "better +9.7%" in row, matrix
    page = tool("trials", "cu128", "cu130", "--markdown").stdout
    assert "## Trials on cu128, cu130" in page and "| label | cu128 | cu130 |" in page
    assert "| cuda-graph-max-bs | better +9.7% | worse -15.2% |" in page


def recipes_on(tool: tiny.Tool, name: str, machine: str) -> dict[str, dict]:
    listed = json.loads(
        tool(
            "try", "--list-recipes", name, "--json", env={"PROVISION_NVML_REPLAY": str(DATA / machine)}
        ).stdout
    )
    return {r["id"]: r for r in listed["recipes"]}


@pytest.mark.slow
def test_the_recipes_are_read_from_the_installed_sglang_and_judged_by_report(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    tool = two_stacks(tmp_path, index_server, provision_bin)
    tool.create("tiny")
    pcie = recipes_on(tool, "cu130", "rtx-pro-6000-x8.nvml.json")  # 8 x SM120 over PCIe, as the first user's
    assert pcie["flashinfer-allreduce-fusion"]["change"]["args"] == [
        "--flashinfer-allreduce-fusion-backend",
        "auto",
    ]
    assert pcie["cuda-graph-max-bs"]["change"]["args"] == ["--cuda-graph-max-bs-decode", "64"]
    assert pcie["pcie-ipc-allreduce"]["applies"] and pcie["pcie-ipc-allreduce"]["change"]["env"] == {
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"
    }
    assert pcie["nccl-tree-graphs"]["change"]["env"] == {"NCCL_ALGO": "allreduce:tree"}
    symm = pcie["torch-symm-mem"]
    assert not symm["applies"] and symm["reason"].startswith("report (symm-mem-allreduce):"), symm
    assert symm["change"]["args"] == ["--enable-torch-symm-mem"]  # in this version; not on this machine

    old = recipes_on(tool, "cu128", "rtx-pro-6000-x8.nvml.json")
    assert old["flashinfer-allreduce-fusion"]["change"]["args"] == ["--enable-flashinfer-allreduce-fusion"]
    assert old["cuda-graph-max-bs"]["change"]["args"] == ["--cuda-graph-max-bs", "64"]
    ipc = old["pcie-ipc-allreduce"]
    assert not ipc["applies"] and ipc["change"] is None
    assert (
        "variable SGLANG_ENABLE_PCIE_IPC_ALLREDUCE (no srt/environ.py)" in ipc["reason"]
        and "absent" in ipc["reason"]
    )

    nvlink = recipes_on(tool, "cu130", "h200-x2.nvml.json")
    assert not nvlink["pcie-ipc-allreduce"]["applies"] and "NVLink" in nvlink["pcie-ipc-allreduce"]["reason"]
    one = recipes_on(tool, "cu130", "h200.nvml.json")
    assert one["cuda-graph-max-bs"]["applies"] and not one["custom-allreduce-pcie"]["applies"]
    assert "one GPU" in one["custom-allreduce-pcie"]["reason"]
    none = recipes_on(tool, "tiny", "h200.nvml.json")
    assert {r["reason"] for r in none.values()} == {"SGLang is not installed in this environment"}

    replay = {"PROVISION_NVML_REPLAY": str(DATA / "rtx-pro-6000-x8.nvml.json")}
    refused = json.loads(
        tool("try", "cu130", "--recipe", "torch-symm-mem", "--runs", "3", "--json", env=replay).stdout
    )
    assert refused["verdict"] == "not-applicable" and "--force runs it anyway" in refused["reason"]
    assert refused["figure"]["runs"] == 0 and refused["baseline_after"] is None
    forced = json.loads(
        tool(
            "try", "cu130", "--recipe", "torch-symm-mem", "--force", "--runs", "3", "--json", env=replay
        ).stdout
    )
    assert forced["verdict"] == "within-noise" and forced["change"]["args"] == ["--enable-torch-symm-mem"]
    absent = json.loads(
        tool("try", "cu128", "--recipe", "pcie-ipc-allreduce", "--force", "--json", env=replay).stdout
    )
    # --force runs no flag it lacks
    assert absent["verdict"] == "not-applicable" and "absent in this version" in absent["reason"]
    human = tool("try", "--list-recipes", "cu130", env={**replay, "COLUMNS": "250"}).stdout
    assert "Recipes on cu130 (sglang 0.5.23)" in human and "torch-symm-mem" in human


def test_the_reader_takes_both_shapes_of_the_parser() -> None:
    from provision.stacks.sglang_flags import parser_flags, table_variables

    old = parser_flags(ast.parse(SERVER_ARGS_0_5_9))
    assert {"--model-path", "--model", "--cuda-graph-max-bs", "--enable-flashinfer-allreduce-fusion"} <= old
    new = parser_flags(ast.parse(FIELDS_0_5_23)) | parser_flags(ast.parse(SERVER_ARGS_0_5_23))
    assert {
        "--cuda-graph-max-bs-decode",
        "--flashinfer-allreduce-fusion-backend",
        "--tp-size",
        "--tensor-parallel-size",
        "--enable-flashinfer-allreduce-fusion",
        "--disable-cuda-graph",
    } <= new
    assert "--cuda-graph-max-bs" not in new and "--tp_size" not in new
    assert table_variables(ast.parse(ENVIRON_0_5_23)) == {
        "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB",
        "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE",
        "SGLANG_PCIE_IPC_MAX_NUMEL",
    }


@pytest.mark.network
def test_every_recipe_is_in_the_real_sglang_0_5_23(tmp_path: Path) -> None:
    """The real wheel alone (cached with the tests' real wheels): each recipe's first spelling, the one 0.5.23 takes,
    names only flags of its parser and variables of its environment table. Fails when SGLang renames one."""
    from cuobjdump import wheel

    from provision.commands import recipes
    from provision.stacks.sglang_flags import (
        ARG_GROUPS,
        ENVIRON,
        SERVER_ARGS,
        parser_flags,
        table_variables,
    )

    flags: set[str] = set()
    with zipfile.ZipFile(wheel("sglang==0.5.23")) as archive:
        names = archive.namelist()
        for name in [SERVER_ARGS, *(n for n in names if n.startswith(ARG_GROUPS) and n.endswith(".py"))]:
            flags |= parser_flags(ast.parse(archive.read(name)))
        variables = table_variables(ast.parse(archive.read(ENVIRON)))
    assert "--cuda-graph-max-bs" not in flags and "--cuda-graph-max-bs-decode" in flags  # 0.5.23 split it
    for recipe in recipes.RECIPES:
        first = recipe.spellings[0]
        assert set(first.flags) <= flags, (recipe.id, set(first.flags) - flags)
        assert {k for k, _ in first.env} <= variables, (recipe.id, {k for k, _ in first.env} - variables)
