"""Without a GPU, `report --env` and `report --lock` say in the terminal why a verdict is not a PASS (a line per
reason, not only under --markdown/--json), and `report --lock` says what it checked and reads only the wheels'
RECORDs: their code judges nothing where no GPU was read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import DATA
from launch import run_provision
from test_lockscan import TAG, cubin, lock_target, write_lock

NO_GPU = {"PROVISION_NVML_REPLAY": str(DATA / "no-driver.nvml.json")}


def test_report_lock_without_a_gpu_reads_records_only_and_says_why(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    default = index_server.index("default")
    default.ranges = True  # as the default registry: RECORDs by range requests
    big = os.urandom(12 << 20)  # a CUDA wheel's weight: what a code scan has to download and read
    wheels = [
        default.add(f"kernels{i}", "1.0", tag=TAG, files={f"kernels{i}/lib/k.cubin": cubin(90) + big})
        for i in range(3)
    ]
    wheels += [
        default.add("alpha", "1.0", tag=TAG, files={"shared/x.py": b"a"}),
        default.add("beta", "1.0", tag=TAG, files={"shared/x.py": b"b"}),
    ]
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)

    def report(*extra: str, env: dict[str, str]) -> tuple[float, object]:
        started = time.perf_counter()
        done = run_provision(
            "report",
            "--lock",
            str(lock),
            *extra,
            timeout=180,
            env={
                "UV_CACHE_DIR": str(tmp_path / f"uv-{len(env)}"),
                "XDG_CACHE_HOME": str(tmp_path / f"xdg-{len(env)}"),
                **env,
            },
        )
        return time.perf_counter() - started, done

    before = default.range_requests
    with_gpu, judged = report(
        "--machine",
        str(Path(__file__).parent.parent.parent / "docs/machines/h200.probe.json"),
        "--json",
        env={},
    )
    without, done = report("--json", env=NO_GPU)
    target = lock_target(done)
    gates = {g["id"]: g for g in target["gates"]}
    # RECORDs still read
    assert gates["conflict"]["status"] == "fail" and "shared/x.py" in gates["conflict"]["reason"]
    assert "no GPU read: checked" in gates["lock-scan"]["reason"] and not [
        g for g in gates if g.startswith("wheel:")
    ]
    # no wheel whole
    assert (
        default.range_requests - before >= len(wheels) and not (tmp_path / "xdg-1/provision/wheels").exists()
    )
    # no timing asserted (a loaded machine reorders two sub-second runs): what is not done is asserted above, no wheel
    # read whole; docs/json.md gives the figures measured
    print(
        f"report --lock of {len(wheels)} wheels ({len(wheels) - 2} x 12 MiB): with a GPU {with_gpu:.2f} s, without {without:.2f} s"
    )
    table, terminal = report(env=NO_GPU)
    lines = terminal.stdout.replace("\n  ", " ")
    assert "lock pylock.cu130.toml: FAIL conflict: " in lines and "no GPU read: checked" in lines, (
        terminal.stdout
    )


def test_report_env_without_a_gpu_says_each_reason_in_the_terminal(
    tmp_path: Path, provision_bin: str
) -> None:
    import sys

    from provision.stacks import uvtool

    venv = tmp_path / "venv"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    home = ["--home", str(tmp_path / "home")]
    run_provision("adopt", "old", str(venv), "--no-lock", *home, check=True)
    done = run_provision("report", "--env", "old", *home, timeout=120, env=NO_GPU)
    assert done.returncode == 0, done.stderr
    env = json.loads(run_provision("report", "--env", "old", "--json", *home, timeout=120, env=NO_GPU).stdout)
    (target,) = [t for t in env["machines"][0]["targets"] if t["kind"] == "environment"]
    assert target["verdict"] == "warn"
    text = " ".join(done.stdout.split())
    for gate in target["gates"]:
        if gate["kind"] == "stack" and gate["status"] == "warn":
            assert f"environment old: WARN {gate['id']}: " in text, done.stdout
