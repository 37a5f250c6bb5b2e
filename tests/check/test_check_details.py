"""Each check's details are typed where a payload's answer or env.json is read (records/details.py) and written back
key for key: the answers the checks gave on the H200 come out of a result, and out of env.json, byte for byte; a key a
payload adds is kept, never dropped; a detail of the wrong type is an error naming the key, never a traceback later."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import tiny
from conftest import ROOT
from test_baseline_runs import with_baseline
from test_records import OLD_ENV_JSON

from provision.atomic import json_text
from provision.envs import records
from provision.envs.records import RecordError
from provision.records import details as typed
from provision.records.results import CheckResult, MalformedResult, Reader

EVIDENCE = ROOT / "docs" / "evidence"
# `check --json` as printed on the H200: every check, and FlashInfer's build for an absent SM (target, target_cubins)
ANSWERS = [
    EVIDENCE / "h200-2026-12-02-final-checks/02-check-json.out",
    EVIDENCE / "h200-2026-11-29-final/24-check-target-sm120.out",
]


def printed() -> list[dict]:
    return [
        check
        for path in ANSWERS
        for check in json.loads(path.read_text()[path.read_text().index("{") :])["checks"]
    ]


def test_the_evidence_holds_every_typed_check() -> None:
    ids = {c["id"] for c in printed() if c.get("details") is not None}
    assert set(typed.BY_CHECK) <= ids and "target_cubins" in json.dumps(printed())


@pytest.mark.parametrize("check", printed(), ids=lambda c: c["id"])
def test_a_checks_details_come_back_out_as_they_went_in(check: dict) -> None:
    answer = {k: check[k] for k in ("status", "reason", "details") if k in check}
    result = CheckResult.answer(check["id"], check["title"], answer)
    assert json.dumps(result.to_dict()["details"] if "details" in check else None) == json.dumps(
        check.get("details")
    )
    stored = CheckResult.parse(Reader(check))
    assert json.dumps(stored.to_dict()) == json.dumps(check)  # every key, in its order
    if check.get("details") is not None:
        assert isinstance(stored.details, typed.BY_CHECK.get(check["id"], typed.Details))
        assert stored.details.to_json() == check["details"]
        assert stored == dataclasses.replace(result, seconds=stored.seconds, output_tail=stored.output_tail)


@pytest.mark.parametrize(
    "check", [c for c in printed() if c.get("details") is not None], ids=lambda c: c["id"]
)
def test_a_key_a_payload_adds_to_its_details_is_never_dropped(check: dict) -> None:
    """A newer payload (or provision) adds a key, before, between or after the typed ones: written back in place."""
    for at in range(len(check["details"]) + 1):
        items = list(check["details"].items())
        grown = dict([*items[:at], ("added_later", {"x": [1, None, "y"]}), *items[at:]])
        result = CheckResult.answer(
            check["id"], check["title"], {"status": check["status"], "details": grown}
        )
        assert json.dumps(result.to_dict()["details"]) == json.dumps(grown)
        assert result.details is not None and result.details.rest["added_later"] == {"x": [1, None, "y"]}


def test_details_round_trip_through_env_json_byte_for_byte(tmp_path: Path) -> None:
    stored = {
        **OLD_ENV_JSON,
        "schema_version": records.SCHEMA_VERSION,
        "checks": {"results": printed(), "at": "2026-12-02T09:00:00+00:00"},
    }
    (tmp_path / "env.json").write_text(json_text(stored))
    first = (tmp_path / "env.json").read_bytes()
    record = records.read(tmp_path)
    records.write(tmp_path, record)
    assert (tmp_path / "env.json").read_bytes() == first
    assert records.read(tmp_path) == record


def test_the_typed_details_are_what_the_report_and_runner_read() -> None:
    by_id = {c["id"]: CheckResult.parse(Reader(c)) for c in printed()}
    symm = typed.of(typed.SymmetricMemoryDetails, by_id["symmetric-memory"].details)
    nccl = typed.of(typed.NcclAllreduceDetails, by_id["nccl-allreduce"].details)
    jit = typed.of(typed.FlashinferJitDetails, by_id["flashinfer-jit"].details)
    drift = typed.of(typed.DriftDetails, by_id["drift"].details)
    assert symm is not None and isinstance(symm.world_size, int) and symm.multicast is False
    assert (
        nccl is not None
        and nccl.peer_access
        and all(isinstance(ok, bool) for row in nccl.peer_access for ok in row)
    )
    assert jit is not None and jit.target is not None and jit.target.built and jit.target_cubins
    assert (
        drift is not None
        and drift.status == "warn"
        and list(drift.counts or {})[:2] == ["modified", "missing"]
    )
    assert typed.of(typed.NcclAllreduceDetails, by_id["symmetric-memory"].details) is None
    # a check id this version does not know (a newer provision's) keeps its details as they are
    unknown = CheckResult.parse(
        Reader({"id": "from-the-future", "status": "pass", "details": {"b": 1, "a": [2]}})
    )
    assert (
        type(unknown.details) is typed.Details
        and json.dumps(unknown.to_dict()["details"]) == '{"b": 1, "a": [2]}'
    )


DAMAGED = [
    ("symmetric-memory", {"multicast": "yes"}, "key 'details.multicast' is str"),
    ("symmetric-memory", {"world_size": 2.5}, "key 'details.world_size' is float"),
    (
        "nccl-allreduce",
        {"peer_access": [[True, 1]]},
        "key 'details.peer_access' is not a list of lists of true or false",
    ),
    ("nccl-allreduce", {"peer_access": True}, "key 'details.peer_access' is not a list"),
    ("flashinfer-jit", {"target": ["built"]}, "key 'details.target' is list"),
    ("flashinfer-jit", {"target": {"built": "/a.so"}}, "key 'details.target.built' is str"),
    (
        "flashinfer-jit",
        {"target_cubins": {"sm_90a": "2"}},
        "key 'details.target_cubins' holds a value that is not an integer",
    ),
    (
        "drift",
        {"status": "pass", "counts": {"modified": True}},
        "key 'details.counts' holds a value that is not an integer",
    ),
    ("drift", {"status": "fine"}, "key 'details.status' is 'fine'"),
]


@pytest.mark.parametrize(("check_id", "details", "words"), DAMAGED)
def test_details_of_the_wrong_type_name_the_key(
    tmp_path: Path, check_id: str, details: dict, words: str
) -> None:
    """In a payload's answer (the runner makes it an ERROR naming the key) and in env.json (exit 7 naming the file):
    before, a report or `check --target-sm` met them as an AttributeError or TypeError traceback."""
    with pytest.raises(MalformedResult, match=re.escape(words)):
        CheckResult.answer(check_id, "t", {"status": "pass", "details": details})
    stored = {
        **OLD_ENV_JSON,
        "checks": {"results": [{"id": check_id, "status": "pass", "details": details}], "at": "T"},
    }
    (tmp_path / "env.json").write_text(json.dumps(stored))
    with pytest.raises(RecordError, match=str(tmp_path / "env.json")) as caught:
        records.read(tmp_path)
    assert words.replace("'details.", "'checks.results[0].details.") in caught.value.message
    assert "\n" not in caught.value.message and caught.value.exit_code == 7


DOCUMENTED = [
    "name",
    "figure",
    "median",
    "min",
    "max",
    "figures",
    "unit",
    "better",
    "at",
    "machine",
    "runs",
    "multi_gpu_allreduce",
    "drift",
]


def test_compare_writes_the_drift_and_each_side_in_the_documented_order(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """env.json keeps its keys sorted: compare read the stored drift's counts back in that order (extra, missing, ...),
    where baseline --json printed them in the drift check's (modified, missing, ...), which docs/json.md gives."""
    section = (ROOT / "docs/json.md").read_text().split("## `provision compare A B --json`")[1]
    assert re.findall(r'"(\w+)"', section.split("}")[0].split("[{")[1])[: len(DOCUMENTED)] == DOCUMENTED
    tool = tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))
    figures = tmp_path / "figures.txt"
    for name in ("old", "new"):
        with_baseline(tool, name, figures)
        tool.create(name)
    figures.write_text("82.0 83.5")
    ran = json.loads(tool("baseline", "old", "--json").stdout)
    tool("baseline", "new")
    compared = json.loads(tool("compare", "old", "new", "--json").stdout)
    for side in compared["environments"]:
        assert list(side) == DOCUMENTED
        assert json.dumps(side["drift"]) == json.dumps(ran["drift"])
    assert list(ran["drift"]["counts"]) == [
        "modified",
        "missing",
        "shared",
        "unowned",
        "extra",
        "other-version",
        "other-source",
    ]


@pytest.fixture(scope="module")
def fake_torch_env(tmp_path_factory) -> Path:
    from test_checks import make_env

    return make_env(tmp_path_factory.mktemp("details"), "0.6.9")


# FlashInfer's payload imports torch in its own process (the multi-GPU checks' ranks do, in children whose answers
# come before their parent's): the fake torch's answer is the last line it prints
@pytest.mark.parametrize(
    ("check_id", "details", "words"), [case for case in DAMAGED if case[0] == "flashinfer-jit"]
)
def test_the_runner_makes_damaged_details_an_error_naming_the_key(
    fake_torch_env: Path, check_id: str, details: dict, words: str
) -> None:
    """The real payload runs (against the test's fake torch, which prints this answer last): the runner reads it once
    and answers ERROR naming the key, where the report or `--target-sm` met the damage as a traceback later."""
    from test_checks import SM120, run

    answer = json.dumps({"status": "pass", "reason": "r", "details": details})
    result = run(fake_torch_env, check_id, gpus=SM120, FAKE_TORCH_ANSWER=answer)
    assert (
        result.status == "error"
        and "the check's answer is malformed" in result.reason
        and words in result.reason
    ), result
