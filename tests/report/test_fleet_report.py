"""`provision report` over a fleet: one entry per --machine in the order given, a summary that groups failures by
cause, ten machines judged in well under a second, and any document that is not a probe document refused in one line."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT
from launch import run_provision

from provision.errors import InputError
from provision.report import compiler, documents, fleet
from provision.report import gates as reporting
from provision.stacks import profiles

H200 = ROOT / "docs/machines/h200.probe.json"
RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"


def old_driver(tmp_path: Path, name: str = "old.probe.json") -> Path:
    data = json.loads(H200.read_text())
    data["driver"].update(version="575.57.08", cuda="12.9")
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def run(provision_bin: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_provision(*map(str, args), timeout=60)


def test_fleet_json_keeps_every_machine_in_order_and_groups_failures_by_cause(
    tmp_path: Path, provision_bin: str
) -> None:
    old = old_driver(tmp_path)
    given = [H200, old, RTX, old, H200]  # a machine given twice is judged twice: one entry per --machine
    done = run(
        provision_bin, "report", *(a for m in given for a in ("--machine", m)), "--profile", "cu130", "--json"
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert list(document)[:3] == ["schema_version", "summary", "machines"]
    assert [m["source"] for m in document["machines"]] == [str(m) for m in given]
    summary = document["summary"]
    assert summary["machines"] == 5
    (cu130,) = summary["targets"]
    verdicts = [m["targets"][0]["verdict"] for m in document["machines"]]
    assert {v: cu130[v] for v in ("pass", "warn", "fail", "skip")} == {
        v: verdicts.count(v) for v in ("pass", "warn", "fail", "skip")
    }
    assert cu130["machines"]["fail"] == [str(m) for m, v in zip(given, verdicts, strict=True) if v == "fail"]
    driver = [c for c in cu130["causes"] if c["gate"] == "driver"]
    # the same old driver twice: one cause, two names
    assert len(driver) == 1 and driver[0]["status"] == "fail"
    assert driver[0]["machines"] == [str(old), str(old)] and "580.65.06" in driver[0]["reason"]
    for cause in cu130["causes"]:  # every cause is the exact reason of a gate on each machine it names
        for source in cause["machines"]:
            machine = document["machines"][[str(m) for m in given].index(source)]
            assert any(
                g["id"] == cause["gate"] and g["reason"] == cause["reason"] and g["status"] == cause["status"]
                for g in machine["targets"][0]["gates"]
            )


def test_fleet_summary_comes_first_in_tables_and_markdown(tmp_path: Path, provision_bin: str) -> None:
    old = old_driver(tmp_path)
    markdown = run(
        provision_bin, "report", "--machine", H200, "--machine", old, "--profile", "cu130", "--markdown"
    )
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout
    assert text.startswith("## Fleet: 2 machines")
    assert text.index("## Fleet") < text.index(f"## {H200}") < text.index(f"## {old}")
    assert f"FAIL on 1 machine ({old}): driver: driver 575.57.08 supports CUDA up to 12.9" in text
    table = run(provision_bin, "report", "--machine", H200, "--machine", old, "--profile", "cu130")
    assert table.returncode == 0, table.stderr
    assert table.stdout.index("Fleet: 2 machines") < table.stdout.index(f"Machine: {H200}")
    single = run(provision_bin, "report", "--machine", H200, "--profile", "cu130")
    assert "Fleet:" not in single.stdout  # one machine: its own report, unchanged


def test_ten_machines_are_judged_in_well_under_a_second(tmp_path: Path) -> None:
    paths = [H200 if i % 3 else RTX for i in range(9)] + [old_driver(tmp_path)]
    chosen = profiles.available()
    # a uv cache that has served many indexes (7,099 index folders on a machine here): read once per report, not
    # once per profile and machine (3-4 s for ten machines)
    uv_cache = tmp_path / "uv-cache"
    for i in range(6000):
        (uv_cache / "wheels-v5" / "index" / f"{i:016x}").mkdir(parents=True)
    compiler.targets.cache_clear()
    start = time.process_time()  # CPU time: what a loaded machine does not stretch
    reports = reporting.report([reporting.load_machine(p) for p in paths], chosen, uv_cache)
    summary = fleet.summarize(reports)
    seconds = time.process_time() - start
    assert seconds < 1.0, f"{seconds:.2f} s of CPU for ten machines"
    assert summary.machines == 10 and [r.facts.source for r in reports] == [str(p) for p in paths]
    assert all(sum(t.count(v) for v in fleet.VERDICTS) == 10 for t in summary.targets)


WRONG = {
    "driver-int": ('{"driver": 5, "gpus": "x"}', "driver: expected an object, got int 5"),
    "gpus-string": ('{"driver": {}, "gpus": "x"}', 'gpus: expected a list, got string "x"'),
    "index-bool": (
        '{"driver": {}, "gpus": [{"index": true, "name": "a"}]}',
        "gpus[0].index: expected an integer",
    ),
    "no-index": ('{"driver": {}, "gpus": [{"name": "a"}]}', "gpus[0]: no 'index' key"),
    "gpu-null": ('{"driver": {}, "gpus": [null]}', "gpus[0]: expected an object, got null"),
    "pcie-string": (
        '{"driver": {}, "gpus": [{"index": 0, "name": "a", "pcie": {"gen_max": "5"}}]}',
        "gpus[0].pcie.gen_max",
    ),
    "sms-int": (
        '{"driver": {}, "gpus": [], "toolkits": [{"version": "13.0", "path": "/x", "nvcc": "n", "sms": [1]}]}',
        "toolkits[0].sms[0]: expected a string",
    ),
    "cc-form": (
        '{"driver": {}, "gpus": [{"index": 0, "name": "a", "compute_capability": "abc"}]}',
        "gpus[0].compute_capability: expected a version such as 9.0",
    ),
    "cuda-form": ('{"driver": {"cuda": "x"}, "gpus": []}', "driver.cuda: expected a version"),
    "a-list": ("[1, 2]", "no driver/gpus keys"),
    "not-json": ("{driver", "not JSON"),
    "deep": ("[" * 100_000 + "]" * 100_000, "not JSON"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_wrong_typed_documents_are_one_error_naming_the_file_and_key(tmp_path: Path, case: str) -> None:
    text, expected = WRONG[case]
    path = tmp_path / f"{case}.json"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        documents.load_machine(path)
    assert caught.value.message.startswith(f"{path}: ") and expected in caught.value.message
    assert "probe --json" in caught.value.hint


def test_binary_and_wrong_typed_documents_exit_2_with_one_line(tmp_path: Path, provision_bin: str) -> None:
    binary = tmp_path / "core.json"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe" + bytes(range(256)))
    typed = tmp_path / "typed.json"
    typed.write_text('{"driver": 5, "gpus": "x"}')
    for bad in (binary, typed):
        done = run(provision_bin, "report", "--machine", H200, "--machine", bad)
        assert done.returncode == 2, done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
        lines = done.stderr.splitlines()
        assert (
            len(lines) == 2
            and lines[0].startswith(f"error: {bad}: not a probe document")
            and lines[1].startswith("hint: ")
        )
        as_json = run(provision_bin, "report", "--machine", bad, "--machine", H200, "--json")
        assert as_json.returncode == 2 and "Traceback" not in as_json.stderr
        assert json.loads(as_json.stdout)["error"]["message"].startswith(f"{bad}: not a probe document")
    good = documents.load_machine(H200)  # the shipped recordings still read
    assert good.gpus and good.driver.cuda
