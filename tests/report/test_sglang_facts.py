"""The facts knowledge.toml holds for SGLang 0.5.23, read again in its released wheel (the wheel alone, not its stack):
the PCIe all-reduce's variable and TP sizes, the fusion's flags and the SMs it selects, the symmetric-memory message and
size table, the custom all-reduce's PCIe refusal. A test fails when a fact no longer holds in the wheel. The wheel is
kept in the tests' cache of real wheels (tests/cuobjdump.py: PROVISION_TEST_CACHE, else ~/.cache/provision-tests)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from cuobjdump import CACHE

from provision import knowledge

pytestmark = pytest.mark.network
VERSION = "0.5.23"
ROOT = "sglang/srt/"


@pytest.fixture(scope="module")
def source() -> dict[str, str]:
    """The wheel's Python files under sglang/srt/, by path: downloaded once (cp312, manylinux_2_34, no dependencies)."""
    folder = CACHE / f"sglang-{VERSION}-wheel"
    found = sorted(folder.glob("sglang-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{folder.name}-") as partial:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    "3.12",
                    "--platform",
                    "manylinux_2_34_x86_64",
                    "-d",
                    partial,
                    f"sglang=={VERSION}",
                ],
                check=True,
                timeout=900,
            )
            with contextlib.suppress(OSError):  # another test process (pytest-xdist) published it first
                Path(partial).rename(folder)
        found = sorted(folder.glob("sglang-*.whl"))
    with zipfile.ZipFile(found[0]) as wheel:
        return {
            name: wheel.read(name).decode()
            for name in wheel.namelist()
            if name.startswith(ROOT) and name.endswith(".py")
        }


def fact(gate: str, package: str = "sglang", version: str = VERSION) -> dict:
    row, by_version = knowledge.feature_fact(gate, package, version)
    assert by_version, f"no [[feature_fact]] of {gate} for {package} {version}"
    return row


def test_the_pcie_all_reduce_variable_and_what_it_serves(source: dict[str, str]) -> None:
    row = fact("pcie_allreduce")
    assert row["available"]
    environ = source[ROOT + "environ.py"]
    assert re.search(rf"\b{row['variable']} = EnvBool\(False\)", environ), "the variable, off by default"
    assert re.search(rf"\b{row['max_numel_variable']} = EnvInt\(", environ)
    ipc = source[ROOT + "distributed/device_communicators/pcie_ipc_ar.py"]
    sizes = ", ".join(map(str, row["world_sizes"]))
    assert f"_SUPPORTED_WORLD_SIZES = ({sizes})" in ipc
    assert "inp.dtype is not torch.bfloat16" in ipc and row["dtype"] == "bf16"
    assert "13.62 ms" in ipc and "21.14 ms" in ipc and "13.62 ms" in row["measured"]
    assert "deterministic" in ipc and "default_cache_path" in ipc


def test_the_fusion_flags_and_the_sms_sglang_selects_it_on(source: dict[str, str]) -> None:
    row = fact("flashinfer_allreduce_fusion")
    fields = source[ROOT + "arg_groups/fields/exec_.py"]
    name = row["flag"].removeprefix("--").replace("-", "_")
    backends = ", ".join(f'"{b}"' for b in row["backends"])
    assert re.search(rf"{name}: A\[\s*Optional\[Literal\[{re.escape(backends)}\]\]", fields), (name, backends)
    assert f'"{row["deprecated_flag"]}"' in source[ROOT + "server_args.py"]
    assert f"Deprecated: use {row['flag']}" in source[ROOT + "server_args.py"]
    fusion = source[ROOT + "layers/flashinfer_comm_fusion.py"]
    platform = " or ".join(f"get_platform().is_sm{m}0" for m in row["select_majors"])
    assert f"if not ({platform}):" in fusion and row["refusal"] in fusion
    overrides = source[ROOT + "arg_groups/overrides.py"]
    assert f"and ({platform})" in overrides, "auto-enable selects the same SMs"


def test_the_symmetric_memory_message_and_size_table(source: dict[str, str]) -> None:
    row = fact("symm_mem_allreduce")
    symm = source[ROOT + "distributed/device_communicators/torch_symm_mem.py"]
    assert (
        row["message"] in symm
        and "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.get(" in symm
        and "multicast_ptr == 0" in symm
    )
    table = source[ROOT + "distributed/device_communicators/all_reduce_utils.py"]
    keys = [int(k) for k in re.findall(r"^    (\d+): \{", table, re.MULTILINE)]
    assert keys == row["arch_keys"]


def test_the_custom_all_reduce_still_refuses_more_than_two_pcie_gpus(source: dict[str, str]) -> None:
    row = fact("custom_allreduce")
    utils = re.sub(
        r'"\s*\n\s*f?"', "", source[ROOT + "distributed/device_communicators/custom_all_reduce_utils.py"]
    )
    assert (
        f"if world_size > {row['max_pcie_world_size']} and not full_nvlink:" in utils
        and row["message"] in utils
    )
