"""The FlashInfer JIT check builds for an absent SM (`check --target-sm`) with the arch-list entry the report names:
one rule, knowledge.toml's, passed to the payload (which imports nothing from provision)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from provision import knowledge
from provision.checks import payload_dir
from provision.checks.runner import _arguments
from provision.envs.records import EnvRecord


def payload():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(payload_dir()))
    try:
        spec = importlib.util.spec_from_file_location(
            "check_flashinfer_jit", payload_dir() / "check_flashinfer_jit.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(payload_dir()))


@pytest.mark.parametrize("cc", ["8.0", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"])
@pytest.mark.parametrize("nvcc", ["12.8", "12.9", "13.0"])
def test_the_payloads_entry_is_the_reports(cc: str, nvcc: str) -> None:
    record = EnvRecord(name="x", cuda="13.0", env={}, packages=[], venv="/nonexistent")
    args = _arguments(compat_check(), record, [], {}, cc)
    major, minor = (int(p) for p in nvcc.split("."))
    entry = payload().arch_entry(cc, (major, minor), args["arch_suffix"], args["family_suffix_min_nvcc"])
    assert entry == knowledge.flashinfer_arch_list([cc], nvcc)


def test_hopper_is_90a_never_90f() -> None:
    """The H200 (docs/evidence/h200-2026-12-01-imports): `check --target-sm 9.0` with nvcc 13.0 built for 9.0f, which
    does not exist, and FAILed; 9.0a is Hopper's arch-specific target."""
    rule = knowledge.gate("flashinfer_jit")
    assert payload().arch_entry("9.0", (13, 0), rule["arch_suffix"], rule["family_suffix_min_nvcc"]) == "9.0a"
    assert (
        payload().arch_entry("12.0", (13, 0), rule["arch_suffix"], rule["family_suffix_min_nvcc"]) == "12.0f"
    )
    assert (
        payload().arch_entry("12.0", (12, 8), rule["arch_suffix"], rule["family_suffix_min_nvcc"]) == "12.0a"
    )
    assert (
        payload().arch_entry("12.0a", (13, 0), rule["arch_suffix"], rule["family_suffix_min_nvcc"]) == "12.0a"
    )


def compat_check():  # type: ignore[no-untyped-def]
    from provision.records.checks import BY_ID

    return BY_ID["flashinfer-jit"]
