"""Tests generated from the cited tables in knowledge.toml: a new row brings its own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from provision import knowledge

K = knowledge.tables()


def test_knowledge_json_is_knowledge_toml() -> None:
    """provision reads knowledge.json (json's C scanner: no tomllib in `probe`); people edit knowledge.toml."""
    from provision import toml

    folder = Path(knowledge.__file__).parent
    wanted = toml.loads((folder / "knowledge.toml").read_text(encoding="utf-8"))
    assert wanted == K, "knowledge.toml changed: run python scripts/knowledge_json.py"


@pytest.mark.parametrize("row", K["driver"], ids=lambda r: r["cuda"])
def test_every_driver_row_is_cited_and_parses(row: dict) -> None:
    assert row["source"]
    assert knowledge.driver_minimum(row["cuda"]) == row["minimum"]
    assert knowledge.version_at_least(row["minimum"], "500")


@pytest.mark.parametrize("row", K["arch"], ids=lambda r: r["cc"])
def test_arch_names(row: dict) -> None:
    assert row["source"]
    assert knowledge.arch_name(row["cc"]) == row["name"]
    label = knowledge.sm_name(row["cc"])
    kind, major, minor, suffix = knowledge.parse_label(label)
    assert (kind, f"{major}.{minor}", suffix) == ("sm", row["cc"], "")


@pytest.mark.parametrize("row", K["toolkit"] + K["torch_wheels"], ids=lambda r: r["cuda"])
def test_sm_lists_are_valid_labels(row: dict) -> None:
    assert row["source"]
    for label in row["sms"]:
        assert knowledge.parse_label(label)[0] == "sm"


@pytest.mark.parametrize(
    ("raw", "text"), [(13010, "13.1"), (13000, "13.0"), (12080, "12.8"), (9020, "9.2"), (12090, "12.9")]
)
def test_nvml_cuda_version_encoding(raw: int, text: str) -> None:
    assert knowledge.cuda_from_nvml(raw) == text


# (label, device cc, runs) per the cited sm_rule table: cubin same major minor>=, a exact, f family, PTX forward.
RUNS = [
    ("sm_120", "12.0", True),
    ("sm_120", "12.1", True),
    ("sm_121", "12.0", False),
    ("sm_100", "12.0", False),
    ("sm_90", "9.0", True),
    ("sm_80", "8.6", True),
    ("sm_86", "8.0", False),
    ("sm_80", "9.0", False),
    ("sm_120a", "12.0", True),
    ("sm_120a", "12.1", False),
    ("sm_90a", "9.0", True),
    ("sm_100a", "10.3", False),
    ("sm_120f", "12.1", True),
    ("sm_120f", "12.0", True),
    ("sm_100f", "10.3", True),
    ("sm_100f", "12.0", False),
    ("compute_120", "12.0", True),
    ("compute_90", "12.0", True),
    ("compute_120", "9.0", False),
    ("compute_100", "10.0", True),
    ("lto_90", "9.0", False),
]


@pytest.mark.parametrize(("label", "cc", "runs"), RUNS)
def test_label_runs_on(label: str, cc: str, runs: bool) -> None:
    assert knowledge.label_runs_on(label, cc) is runs


def test_every_sm_rule_kind_is_cited_and_exercised() -> None:
    kinds = {row["kind"]: row["source"] for row in K["sm_rule"]}
    assert all(kinds.values())
    exercised = {"cubin": "sm_120", "cubin-a": "sm_120a", "cubin-f": "sm_120f", "ptx": "compute_120"}
    assert set(kinds) == set(exercised)
    for label in exercised.values():
        assert any(label == row[0] for row in RUNS)


@pytest.mark.parametrize("name", list(K["gates"]))
def test_every_gate_is_cited(name: str) -> None:
    assert knowledge.gate(name)["source"] and knowledge.gate(name)["title"]


@pytest.mark.parametrize(
    ("driver_cuda", "target", "ok"),
    [
        ("13.1", "13.0", True),
        ("13.0", "13.0", True),
        ("12.8", "13.0", False),
        (None, "12.8", False),
        ("13.0", "13.1", True),
        ("13.0", "13.2", True),
        ("13.0", "13.5", True),
        ("12.9", "13.2", False),
        ("13.0", "12.8", True),
        ("12.2", "12.8", True),
        ("11.8", "12.1", False),
    ],
)
def test_driver_supports(driver_cuda: str | None, target: str, ok: bool) -> None:
    """Minor-version compatibility: any 13.x on a driver that reports 13.0 (R580), any 12.x on one that reports 12.0
    (R525); never across majors upwards (a 13.x build on a driver of CUDA 12.x fails to load)."""
    assert knowledge.driver_supports(driver_cuda, target) is ok


@pytest.mark.parametrize("row", K["minor_compat"], ids=lambda r: r["major"])
def test_minor_compat_covers_every_minor_of_its_major_and_only_from_an_older_driver(row: dict) -> None:
    major = row["major"]
    assert knowledge.minor_compat(f"{major}.0", f"{major}.9") == row
    # the driver reports it: full support, no note
    assert knowledge.minor_compat(f"{major}.9", f"{major}.0") is None
    assert knowledge.minor_compat(f"{int(major) - 1}.9", f"{major}.0") is None
    assert (
        row["ptx_error"] == "cudaErrorUnsupportedPtxVersion"
        and "minor-version-compatibility" in row["source"]
    )


@pytest.mark.parametrize(
    ("built", "driver", "too_new"),
    [
        ("13.2", "13.0", True),
        ("13.0", "13.0", False),
        ("13.0", "13.1", False),
        (None, "13.0", False),
        ("13.2", None, False),
    ],
)
def test_ptx_too_new(built: str | None, driver: str | None, too_new: bool) -> None:
    assert knowledge.ptx_too_new(built, driver) is too_new


@pytest.mark.parametrize(
    ("version", "cuda"),
    [
        ("0.7.2+cu132", "13.2"),
        ("2.9.1+cu128", "12.8"),
        ("2.16.0.dev20261126+cu130", "13.0"),
        ("2.15.0", None),
        ("2.9.1+cpu", None),
    ],
)
def test_cuda_of_local(version: str, cuda: str | None) -> None:
    assert knowledge.cuda_of_local(version) == cuda


def test_torch_wheels_of_cuda_13_2_are_known_from_a_real_wheel() -> None:
    """torch 2.15.0+cu132 (the public registry's default build): its arch flags and its cubins, in the evidence file."""
    sms = knowledge.torch_wheel_sms("13.2")
    assert sms is not None and "sm_120" in sms and "sm_90" in sms
    row = next(r for r in knowledge.tables()["torch_wheels"] if r["cuda"] == "13.2")
    evidence = (Path(__file__).resolve().parent.parent.parent / row["source"].split(" ")[0]).read_text()
    assert "2.15.0+cu132 13.2 " + " ".join(sms) in evidence


def _rows() -> list[tuple[str, dict]]:
    found = []
    for table, value in K.items():
        rows = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        found += [(table, row) for row in rows if isinstance(row, dict)]
    return found


@pytest.mark.parametrize(("table", "row"), _rows(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_fact_carries_its_source_and_the_date_it_was_read(table: str, row: dict) -> None:
    import datetime

    assert row["source"], (table, row)
    assert datetime.date.fromisoformat(row["as_of"]) <= datetime.date.fromisoformat(knowledge.as_of())


@pytest.mark.parametrize("row", K["feature_fact"], ids=lambda r: f"{r['gate']}-{r['package']}{r['versions']}")
def test_every_feature_fact_is_chosen_by_a_version_in_its_range_and_by_no_other_row(row: dict) -> None:
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(row["versions"])
    probe = next(
        v
        for v in ("0.1", "0.5.6", "0.5.20", "0.5.21", "0.5.23", "0.6.9", "0.6.17", "0.7.1", "0.7.2", "9.0")
        if v in spec
    )
    chosen, by_version = knowledge.feature_fact(row["gate"], row["package"], probe)
    assert by_version and chosen == row
    assert row["gate"] in K["gates"], "every fact belongs to a gate with a title"


def test_a_stack_that_does_not_name_the_package_is_judged_by_the_oldest_row() -> None:
    row, by_version = knowledge.feature_fact("symm_mem_allreduce", "sglang", None)
    assert not by_version and row["versions"] == "<0.5.20"


@pytest.mark.parametrize("row", K["newest_known"], ids=lambda r: r["package"])
def test_the_newest_known_release_has_facts(row: dict) -> None:
    packages = {r["package"] for r in K["feature_fact"]}
    assert row["package"] in packages
    assert knowledge.newest_known(row["package"]) == row


@pytest.mark.parametrize("row", K["cuda_release"], ids=lambda r: r["release"])
def test_cuda_releases_have_a_toolkit_row_and_a_driver_branch(row: dict) -> None:
    assert knowledge.toolkit_sms(row["cuda"]) is not None and int(row["driver_branch"]) >= 580
    assert row["release"].startswith(row["cuda"] + ".")


@pytest.mark.parametrize("row", K["pin"], ids=lambda r: r["package"])
def test_every_pin_names_what_it_forces(row: dict) -> None:
    version = row["versions"].removeprefix("==")
    assert knowledge.pin_for(row["package"], version) == row
    assert all(part.split("==")[1] in row["why"] for part in row["requires"].split(", ")), (
        "the line names the versions forced"
    )
    assert row["fix"], (
        "what to do, the hint of the one-line error a lock that cannot resolve it gets (stacks/pinpairs.py)"
    )
