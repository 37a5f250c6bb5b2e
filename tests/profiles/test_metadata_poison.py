"""`profiles new` keeps a release's METADATA headers in provision's metadata/ by the wheel's sha256 (adversary of
issue 39, round three). That sha256 is the index's word: a METADATA read by range requests (or from a .metadata file)
is not tied to it (nothing ties the ranges to the bytes a full GET gives). An index used once that lists the genuine
wheel's sha256 and answers ranges from a wheel of other Requires-Dist must not decide what `profiles new` writes
later against the genuine index: such an entry answers only for the URL it was read from; one read from the whole
wheel, its sha256 checked, answers for that sha256 anywhere."""

from __future__ import annotations

import json
from pathlib import Path

from test_newprofile import SGLANG_REQUIRES, SGLANG_TAG, new, serve_sglang

from provision.stacks import profiles


def test_a_hostile_indexs_metadata_kept_by_a_borrowed_sha256_does_not_answer_for_the_genuine_index(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    default = serve_sglang(index_server, ranges=True)
    (genuine,) = default.root.glob("sglang/sglang-0.5.23-*.whl")
    hostile = index_server.index("hostile")
    hostile.ranges = True
    lying = [r.replace("torch==2.14.1", "torch==2.14.0") for r in SGLANG_REQUIRES]
    padding = {f"sglang/blob{i}.bin": bytes(range(256)) * 4096 for i in range(4)}  # as the genuine wheel's
    forged = hostile.add(
        "sglang",
        "0.5.23",
        tag=SGLANG_TAG,
        requires=lying,
        extras=("test",),
        files={"sglang/__init__.py": b"", **padding},
    )
    # its size is the HEAD's
    assert forged.name == genuine.name and forged.stat().st_size == genuine.stat().st_size
    # the page (and a full GET) give the genuine wheel's sha256
    hostile.swapped[forged.name] = genuine.read_bytes()
    for project in ("cuda-toolkit",):
        for wheel in default.root.glob(f"{project}/*.whl"):
            (hostile.root / project).mkdir(parents=True, exist_ok=True)
            (hostile.root / project / wheel.name).write_bytes(wheel.read_bytes())

    once = new(
        provision_bin, hostile, tmp_path / "once.toml", "--from", "sglang==0.5.23", "--cuda", "13.0", "--json"
    )
    assert once.returncode == 0 and json.loads(once.stdout)["metadata_from"] == "range", once.stderr
    assert {p.name: p for p in profiles.load_file(tmp_path / "once.toml").packages}[
        "torch"
    ].version == "==2.14.0"

    later = new(
        provision_bin,
        default,
        tmp_path / "later.toml",
        "--from",
        "sglang==0.5.23",
        "--cuda",
        "13.0",
        "--json",
    )
    assert later.returncode == 0, later.stderr
    assert {p.name: p for p in profiles.load_file(tmp_path / "later.toml").packages}[
        "torch"
    ].version == "==2.14.1"


def test_a_hostile_indexs_record_kept_by_a_borrowed_sha256_does_not_hide_a_conflict_on_the_genuine_index(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """The same for the RECORDs `report --lock` (no GPU) and `lock` read by range requests: a lock of another index
    that lists the genuine wheels' sha256 (its pages and full GETs are the genuine wheels) and answers ranges from
    wheels whose RECORDs leave out the path both install; the genuine lock's conflict gate must still FAIL."""
    import os

    from launch import run_provision
    from test_lockscan import TAG, lock_target, write_lock
    from test_report_no_gpu import NO_GPU

    default, hostile = index_server.index("default"), index_server.index("hostile")
    default.ranges = hostile.ranges = True
    genuine = [
        default.add("alpha", "1.0", tag=TAG, files={"shared/x.py": b"a"}),
        default.add("beta", "1.0", tag=TAG, files={"shared/x.py": b"b"}),
    ]
    for wheel, other in zip(genuine, ("alpha/yy.py", "beta/yyy.py"), strict=True):
        # as long: the same size
        forged = hostile.add(wheel.name.split("-")[0], "1.0", tag=TAG, files={other: b"c"})
        assert forged.name == wheel.name and forged.stat().st_size == wheel.stat().st_size
        hostile.swapped[forged.name] = wheel.read_bytes()
    env = {"UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg"), **NO_GPU}
    for folder in (tmp_path / "h", tmp_path / "g"):
        folder.mkdir()

    def gate(index, folder: Path) -> dict:
        # the genuine wheels' names and sha256s
        lock = write_lock(folder / "pylock.cu130.toml", index, genuine)
        done = run_provision("report", "--lock", str(lock), "--json", timeout=180, env=env)
        return {g["id"]: g for g in lock_target(done)["gates"]}["conflict"]

    assert gate(hostile, tmp_path / "h")["status"] == "pass"  # what that index said: its own word
    assert gate(default, tmp_path / "g")["status"] == "fail"
    assert os.path.isdir(tmp_path / "xdg" / "provision" / "records")
