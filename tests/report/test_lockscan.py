"""`provision report --lock`: every wheel of a lock judged per GPU before anything is installed, from uv's cache in
place or fetched from a real index on 127.0.0.1 (sha256 checked), never unpacked; the torch gate from the scanned wheel."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import tomlkit
from conftest import ROOT
from launch import run_provision
from locks import sealed
from stacks import PY3

H200 = ROOT / "docs/machines/h200.probe.json"
RTX = ROOT / "docs/machines/rtx-pro-6000-x8.probe.json"
TAG = "py3-none-manylinux_2_28_x86_64"


def cubin(sm: int) -> bytes:
    """A bare cubin as nvcc writes its ELF header: EM_CUDA, the SM in bits 8-15 of e_flags (ABI version 8)."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, 8]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 0, sm << 8, 64, 56, 0, 64, 0, 0)


def serve(index_server):
    default = index_server.index("default")
    wheels = [
        default.add(
            "torch",
            "2.14.1",
            tag=TAG,
            files={"torch/lib/a.cubin": cubin(90), "torch/lib/b.cubin": cubin(120), "torch/__init__.py": b""},
        ),
        default.add("nvidia-old", "1.0", tag=TAG, files={"nvidia/old/lib/k.cubin": cubin(80)}),
        default.add("filelock", "3.20.0", tag=PY3),
    ]
    return default, wheels


def write_lock(path: Path, default, wheels: list[Path], *, tamper: str = "") -> Path:
    packages = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if wheel.name.startswith(tamper or "\0"):
            digest = hashlib.sha256(b"tampered").hexdigest()
        url = default.url.replace("/simple", "/files/") + wheel.name.replace("+", "%2B")
        packages.append(
            {
                "name": name.replace("_", "-"),
                "version": version,
                "wheels": [{"name": wheel.name, "url": url, "hashes": {"sha256": digest}}],
            }
        )
    doc = {
        "lock-version": "1.0",
        "created-by": "tests",
        "requires-python": ">=3.10",
        "packages": packages,
        "tool": {"provision": {"profile": "cu130"}},
    }
    path.write_text(sealed(doc))
    return path


def report(
    provision_bin: str, lock: Path, machine: Path, cache: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "UV_CACHE_DIR": str(cache), "XDG_CACHE_HOME": f"{cache}-xdg"}
    return run_provision(
        "report", "--lock", str(lock), "--machine", str(machine), "--json", *extra, timeout=120, env=env
    )


def lock_target(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode in (0, 1), done.stderr
    return next(t for t in json.loads(done.stdout)["machines"][0]["targets"] if t["kind"] == "lock")


def test_fetched_wheels_judged_per_gpu(index_server, provision_bin: str, tmp_path: Path) -> None:
    default, wheels = serve(index_server)
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)
    target = lock_target(report(provision_bin, lock, H200, tmp_path / "empty-cache"))
    gates = {g["id"]: g for g in target["gates"]}
    assert gates["wheel:torch"]["status"] == "pass" and "sm_120 sm_90" not in gates["wheel:torch"]["reason"]
    assert "sm_90 sm_120" in gates["wheel:torch"]["reason"]
    assert (
        gates["wheel:nvidia-old"]["status"] == "fail"
        and "no kernel image" in gates["wheel:nvidia-old"]["reason"]
    )
    assert "wheel:filelock" not in gates  # no CUDA code: not a gate
    torch = gates["torch-wheels"]
    assert (
        torch["status"] == "pass"
        and "the scanned wheel torch-2.14.1" in torch["reason"]
        and "table" not in torch["reason"]
    )
    assert torch["reason"].endswith("carries sm_90 sm_120")  # in SM order, not string order
    assert "3 wheels, 2 with CUDA code; 0 scanned before" in gates["lock-scan"]["reason"]
    assert "0 from uv's cache" in gates["lock-scan"]["reason"] and "3 fetched" in gates["lock-scan"]["reason"]
    assert target["verdict"] == "fail"
    # a URL or a file of this repository
    assert all(
        "https://" in g["source"] or "docs/" in g["source"] or "provision/" in g["source"]
        for g in target["gates"]
        if g["source"]
    ), target["gates"]
    packages = {p["name"]: p for p in target["packages"]}
    assert (
        packages["torch"]["cubin"] == {"sm_90": 1, "sm_120": 1} and packages["torch"]["origin"] == "fetched"
    )
    assert packages["nvidia-old"]["require"]["9.0"]["status"] == "fail"
    assert not list(tmp_path.glob("**/a.cubin"))  # nothing unpacked
    # the same lock on the SM120 machine: torch still passes, the sm_80 wheel still fails
    # (each wheel's scan kept by its sha256 in scans/: nothing is inflated again)
    again = lock_target(report(provision_bin, lock, RTX, tmp_path / "empty-cache"))
    rtx = {g["id"]: g["status"] for g in again["gates"]}
    assert rtx["wheel:torch"] == "pass" and rtx["wheel:nvidia-old"] == "fail"
    assert {p["name"]: p["origin"] for p in again["packages"]} == {
        "torch": "scan cache",
        "nvidia-old": "scan cache",
    }
    assert "3 scanned before" in next(g for g in again["gates"] if g["id"] == "lock-scan")["reason"]
    assert {p["name"]: p["cubin"] for p in again["packages"]} == {
        p["name"]: p["cubin"] for p in target["packages"]
    }


def test_wheels_in_uvs_cache_are_scanned_there(index_server, provision_bin: str, tmp_path: Path) -> None:
    from provision.stacks import uvtool

    default, wheels = serve(index_server)
    cache = tmp_path / "uv-cache"
    venv = tmp_path / "venv"
    uvtool.run(["venv", str(venv), "--python", sys.executable, "--quiet"])
    uvtool.run(
        [
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "--index-url",
            default.url,
            "--cache-dir",
            str(cache),
            "--quiet",
            "torch==2.14.1",
            "nvidia-old==1.0",
        ]
    )
    before = len(default.requests)
    target = lock_target(
        report(provision_bin, write_lock(tmp_path / "pylock.toml", default, wheels), H200, cache)
    )
    origins = {p["name"]: p["origin"] for p in target["packages"]}
    assert origins == {"torch": "uv cache", "nvidia-old": "uv cache"}
    fetched = [r for r in default.requests[before:] if r.endswith(".whl")]
    assert fetched == [next(r for r in fetched if "filelock" in r)]  # only the wheel uv never saw


def test_no_fetch_skips_and_a_changed_file_is_refused(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    default, wheels = serve(index_server)
    lock = write_lock(tmp_path / "pylock.toml", default, wheels)
    skipped = {
        g["id"]: g
        for g in lock_target(report(provision_bin, lock, H200, tmp_path / "c", "--no-fetch"))["gates"]
    }
    assert (
        skipped["wheel:torch"]["status"] == "skip" and "not in uv's cache" in skipped["wheel:torch"]["reason"]
    )
    # no scanned torch: the table is the fallback
    assert "from the table" in skipped["torch-wheels"]["reason"]
    bad = report(
        provision_bin,
        write_lock(tmp_path / "pylock.bad.toml", default, wheels, tamper="nvidia_old"),
        H200,
        tmp_path / "c",
    )
    assert (
        bad.returncode == 5
        and "is not the lock's" in bad.stderr
        and len(bad.stderr.strip().splitlines()) == 2
    )


def test_hostile_urls_in_a_lock_never_leak_a_password_nor_read_local_files(
    provision_bin: str, tmp_path: Path
) -> None:
    """A lock's URL without a host, with a port that is not a number: one exit-2 line with the
    credentials as ****, never requests' own message (which prints the URL whole) under exit 3. A file:// or ftp://
    URL, or one without a scheme, is not fetched: the wheel's gate says so, and nothing on this machine's disk is read as a wheel."""
    wheel = "nvidia_x-1.0-py3-none-manylinux_2_28_x86_64.whl"

    def lock_with(url: str) -> Path:
        doc = {
            "lock-version": "1.0",
            "created-by": "tests",
            "packages": [
                {
                    "name": "nvidia-x",
                    "version": "1.0",
                    "wheels": [{"name": wheel, "url": url, "hashes": {"sha256": "00" * 32}}],
                }
            ],
        }
        path = tmp_path / "pylock.toml"
        path.write_text(sealed(doc))
        return path

    for url in (
        "http://u:s3cretpw@/x.whl",
        "http://u:s3cretpw@127.0.0.1:abc/x.whl",
        "http://u:s3cretpw@[::1/x.whl",
    ):
        done = report(provision_bin, lock_with(url), H200, tmp_path / "c")
        assert done.returncode == 2, (url, done.stderr)
        assert "s3cretpw" not in done.stdout + done.stderr and "****@" in done.stderr, url
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 2, done.stderr
    for url in ("file:///etc/passwd", "ftp://u:s3cretpw@127.0.0.1/x.whl", "u:s3cretpw@127.0.0.1/x.whl"):
        done = report(provision_bin, lock_with(url), H200, tmp_path / "c")
        gate = next(g for g in lock_target(done)["gates"] if g["id"] == "wheel:nvidia-x")
        assert gate["status"] == "skip" and "only http and https" in gate["reason"], gate
        assert "s3cretpw" not in done.stdout + done.stderr


def test_a_wheel_without_a_sha256_in_the_lock_is_refused_and_nothing_is_downloaded(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """packaging.pylock requires `hashes` on a wheel (PEP 751: a lock without them is not read, exit 2), but not a
    sha256: a wheel with only sha512 (or md5) was downloaded and scanned unchecked. Refused now, before any download:
    exit 6, one line naming the lock, the package and the wheel's URL (its password as ****)."""
    default = index_server.index("private", userinfo="alice:s3cretpw@")
    default.password = "s3cretpw"
    wheels = [
        default.add("torch", "2.14.1", tag=TAG, files={"torch/lib/a.cubin": cubin(90)}),
        default.add("nvidia-old", "1.0", tag=TAG, files={"nvidia/old/lib/k.cubin": cubin(80)}),
    ]
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)
    # with every sha256: fetched and judged
    assert lock_target(report(provision_bin, lock, H200, tmp_path / "c"))
    for hashes in ({"sha512": hashlib.sha512(wheels[1].read_bytes()).hexdigest()}, {"md5": "0" * 32}):
        doc = tomlkit.parse(lock.read_text())
        doc["packages"][1]["wheels"][0]["hashes"] = hashes
        unhashed = tmp_path / "pylock.unhashed.toml"
        unhashed.write_text(sealed(doc))
        before = len(default.requests)
        for extra in ((), ("--no-fetch",)):
            done = report(provision_bin, unhashed, H200, tmp_path / "c", *extra)
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 6 and len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
            url = (
                default.url.replace("alice:s3cretpw@", "****@").replace("/simple", "/files/") + wheels[1].name
            )
            assert lines[0] == (
                f"error: {unhashed}: nvidia-old 1.0: the wheel {url} has no sha256 in the lock "
                f"(only {next(iter(hashes))}); nothing was downloaded"
            ), lines[0]
            assert lines[1] == "hint: re-lock it: provision lock cu130 (it records every wheel's sha256)"
            assert "s3cretpw" not in done.stdout + done.stderr
        assert default.requests[before:] == [], (
            "nothing of the lock was downloaded, the unhashed wheel least of all"
        )


def test_two_wheels_installing_one_path_and_two_cuda_majors_fail_and_wheels_are_read_once(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """cuda-python 12.6 beside cuda-bindings 13 (the resolver took both): the same path with other contents, and two
    CUDA majors. NVIDIA's cu12 wheels each carry the same empty nvidia/__init__.py: not a conflict. A second report of
    the same lock reads every wheel from provision's cache: nothing downloaded."""
    import os

    default = index_server.index("default")
    wheels = [
        default.add(
            "cuda-python",
            "12.6.2.post1",
            tag=PY3,
            files={"cuda/bindings/driver.py": b"# 12.6\n", "cuda/__init__.py": b""},
        ),
        default.add(
            "cuda-bindings",
            "13.5.0",
            tag=TAG,
            files={"cuda/bindings/driver.py": b"# 13.5\n", "cuda/__init__.py": b""},
        ),
        default.add(
            "nvidia-cublas-cu12",
            "12.8.4.1",
            tag=TAG,
            files={"nvidia/__init__.py": b"", "nvidia/cublas/lib/x.cubin": cubin(90)},
        ),
        default.add(
            "nvidia-cudnn-cu12",
            "9.10.2.21",
            tag=TAG,
            files={"nvidia/__init__.py": b"", "nvidia/cudnn/lib/y.so": b"y"},
        ),
    ]
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    argv = [provision_bin, "report", "--lock", str(lock), "--machine", str(H200), "--json"]
    # a table; progress on stderr
    first = subprocess.run(argv[:-1], capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0 and "no two wheels install the same path" in first.stdout
    assert all(re.search(rf"fetched {re.escape(w.name)}: \d+ B in [\d.]+ s", first.stderr) for w in wheels), (
        first.stderr
    )
    before = len(default.requests)
    target = lock_target(subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env))
    gates = {g["id"]: g for g in target["gates"]}
    assert target["verdict"] == "fail"
    conflict = gates["conflict"]
    assert conflict["status"] == "fail", conflict
    assert conflict["reason"].startswith(
        f"{wheels[1].name} and {wheels[0].name} both install cuda/bindings/driver.py"
    )
    assert "nvidia/__init__.py" not in conflict["reason"] and "cuda/__init__.py" not in conflict["reason"]
    mix = gates["cuda-mix"]
    assert (
        mix["status"] == "fail"
        and "CUDA 12: cuda-python 12.6.2.post1" in mix["reason"]
        and "CUDA 13: cuda-bindings 13.5.0" in mix["reason"]
    )
    assert "nvidia-cublas-cu12 12.8.4.1" in mix["reason"]
    again = lock_target(subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env))
    assert default.requests[before:] == [], "the second report downloads nothing"
    assert {g["id"]: g["status"] for g in again["gates"]}["conflict"] == "fail"
    assert "0 from uv's cache" in next(g for g in again["gates"] if g["id"] == "lock-scan")["reason"]
    assert "4 scanned before" in next(g for g in again["gates"] if g["id"] == "lock-scan")["reason"]
    # with its scan and RECORD forgotten, a kept wheel changed on disk is checked again, found wrong, and fetched anew
    for kind in ("scans", "records"):
        shutil.rmtree(tmp_path / "xdg/provision" / kind)
    kept = next((tmp_path / "xdg/provision/wheels").glob(f"*/{wheels[0].name}"))
    kept.write_bytes(b"not the wheel")
    lock_target(subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env))
    assert [r for r in default.requests[before:] if r.endswith(".whl")] == [
        f"/default/files/{wheels[0].name}"
    ]
    # without the two wrong ones, one CUDA major and no shared path: both PASS
    lock = write_lock(tmp_path / "pylock.ok.toml", default, wheels[2:])
    ok = {
        g["id"]: g
        for g in lock_target(
            subprocess.run(
                [*argv[:3], str(lock), *argv[4:]], capture_output=True, text=True, timeout=120, env=env
            )
        )["gates"]
    }
    assert (
        ok["conflict"]["status"] == "pass"
        and ok["cuda-mix"]["status"] == "pass"
        and ok["cuda-mix"]["reason"] == "CUDA 12 only"
    )


def test_the_report_is_one_operation_and_a_lock_is_scanned_once_for_every_machine(
    index_server, tmp_path: Path, monkeypatch
) -> None:
    from provision.report import assemble, lockscan

    default, wheels = serve(index_server)
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    scans: list[Path] = []
    scan_lock = lockscan.scan_lock
    monkeypatch.setattr(lockscan, "scan_lock", lambda path, **kw: scans.append(path) or scan_lock(path, **kw))
    from provision.stacks import lockfile

    reads: list[Path] = []
    read = lockfile.read
    monkeypatch.setattr(lockfile, "read", lambda path, **kw: reads.append(path) or read(path, **kw))
    result = assemble.build([H200, RTX], locks=[lock], fetch=False)
    assert scans == [lock]
    # read and validated once: the scan and the stack it describes read one and the same lock
    assert reads == [lock]
    assert [[(t.kind, t.name) for t in m.targets] for m in result.machines] == [[("lock", lock.name)]] * 2
    assert result.summary.machines == 2 and [m.facts.source for m in result.machines] == [str(H200), str(RTX)]
    document = result.to_dict()
    assert (
        list(document) == ["summary", "machines", "knowledge_as_of"]
        and document["machines"][1]["targets"][0]["kind"] == "lock"
    )


def test_two_packages_whose_wheels_share_one_sha256_are_each_judged(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """Two file names, one content: both were fetched into the one folder their sha256 names, and the second found
    the first's name there and removed it (exit 3, "the wheel just fetched is not there"). Scanned once, judged twice."""
    import shutil

    default = index_server.index("default")
    first = default.add("nvidia-x", "1.0", tag=TAG, files={"nvidia/x/lib/k.cubin": cubin(90)})
    second = first.with_name(f"nvidia_y-1.0-{TAG}.whl")
    shutil.copy(first, second)
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, [first, second])
    for _ in range(2):  # fetched, then from provision's cache
        done = report(provision_bin, lock, H200, tmp_path / "c")
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        target = lock_target(done)
        packages = {p["name"]: p for p in target["packages"]}
        assert set(packages) == {"nvidia-x", "nvidia-y"}, packages
        gates = {g["id"]: g["status"] for g in target["gates"]}
        assert gates["wheel:nvidia-x"] == gates["wheel:nvidia-y"] == "pass", gates


def test_ptx_only_kernels_made_by_a_newer_cuda_than_the_driver_warn_with_the_driver_to_install(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    """A wheel built with CUDA 13.2 (+cu132) that carries only PTX for SM120: on a 590 driver (CUDA 13.1) the driver's
    JIT of it fails (cudaErrorUnsupportedPtxVersion), though minor-version compatibility runs the rest; where the
    driver reports 13.2, or the GPU has a cubin (H200's sm_90), there is nothing to say."""
    from test_scan_hostile import container, elf64

    from provision.scan import fatbin

    code = container(90) + container(120, fatbin.KIND_PTX)
    library = elf64([(".nv_fatbin", 1, 2, 64, len(code))], payload=code)
    default = index_server.index("default")
    wheels = [
        default.add(
            "flashinfer-jit-cache", "0.7.2+cu132", tag=TAG, files={"flashinfer_jit_cache/libk.so": library}
        )
    ]
    lock = write_lock(tmp_path / "pylock.cu130.toml", default, wheels)
    gates = {g["id"]: g for g in lock_target(report(provision_bin, lock, RTX, tmp_path / "cache"))["gates"]}
    warned = gates["ptx-driver"]
    assert warned["status"] == "warn" and "cudaErrorUnsupportedPtxVersion" in warned["reason"]
    assert "flashinfer-jit-cache 0.7.2+cu132 on sm_120: PTX only, made by CUDA 13.2" in warned["reason"]
    assert (
        "driver 590.48.01 supports CUDA up to 13.1" in warned["reason"]
        and "supports CUDA 13.2" in warned["reason"]
    )
    newer = json.loads(RTX.read_text())
    newer["driver"].update(cuda="13.2", cuda_raw=13020)
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    for machine in (tmp_path / "newer.json", H200):
        assert "ptx-driver" not in {
            g["id"] for g in lock_target(report(provision_bin, lock, machine, tmp_path / "cache"))["gates"]
        }
