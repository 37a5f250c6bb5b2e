"""`provision lock` warns, before anything is downloaded whole, of what `report --lock` FAILs: two wheels installing
one path (their RECORDs read by HTTP range requests) and NVIDIA libraries of two CUDA majors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import stacks
from launch import run_provision
from test_lockscan import TAG

from provision.stacks import lockcheck


def test_record_paths_land_where_an_installer_puts_them() -> None:
    record = ("cuda/bindings/driver.py,sha256=abc,10\nx-1.0.data/purelib/cuda/bindings/nvrtc.py,sha256=def,5\n"
              "x-1.0.data/scripts/tool,sha256=0,1\nx-1.0.dist-info/METADATA,sha256=1,2\nx-1.0.dist-info/RECORD,,\n")
    assert lockcheck.installed(record) == {"cuda/bindings/driver.py": "sha256=abc", "cuda/bindings/nvrtc.py": "sha256=def",
                                           "bin/tool": "sha256=0"}
    found = lockcheck.conflicts({"a.whl": {"p/x.py": "sha256=1", "nvidia/__init__.py": "sha256=e"},
                                 "b.whl": {"p/x.py": "sha256=2", "nvidia/__init__.py": "sha256=e"}})
    assert [(c.first, c.second, c.path, c.count) for c in found] == [("a.whl", "b.whl", "p/x.py", 1)]
    assert lockcheck.cuda_mix([("torch", "2.9.1+cu130"), ("nvidia-nccl-cu13", "2.28.3")]) == ""
    assert "CUDA 12: nvidia-cublas-cu12 12.8.4.1" in lockcheck.cuda_mix([("torch", "2.9.1+cu130"), ("nvidia-cublas-cu12", "12.8.4.1")])


def test_lock_warns_of_a_shared_path_and_mixed_cuda_majors(index_server, tmp_path: Path, provision_bin: str) -> None:
    default = index_server.index("default")
    default.ranges = default.pep658 = True  # as the default registry: uv reads .metadata; RECORDs are read by range
    default.add("stack", "1.0", tag=stacks.PY3, requires=("cuda-python==12.6.2.post1", "cuda-bindings==13.5.0"))
    default.add("cuda-python", "12.6.2.post1", tag=stacks.PY3, files={"cuda/bindings/driver.py": b"# 12.6\n"})
    default.add("cuda-bindings", "13.5.0", tag=TAG, files={"cuda/bindings/driver.py": b"# 13.5\n" + b"x" * 300_000})
    profile = tmp_path / "stack.toml"
    profile.write_text(f'schema = 1\nname = "stack"\ncuda = "13.0"\n[indexes]\ndefault = "{default.url}"\n[packages]\nstack = "==1.0"\n')
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    argv = ["lock", str(profile), "--platform", stacks.PLATFORM, "--python", stacks.PYTHON, "-o", str(tmp_path / "pylock.stack.toml")]
    done = run_provision(*argv, "--json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = {w["id"]: w["reason"] for w in json.loads(done.stdout)["warnings"]}
    assert warnings["conflict"].startswith("cuda_bindings-13.5.0-py3-none-manylinux_2_28_x86_64.whl and "
                                           "cuda_python-12.6.2.post1-py3-none-any.whl both install cuda/bindings/driver.py")
    assert "CUDA 12: cuda-python 12.6.2.post1; CUDA 13: cuda-bindings 13.5.0" in warnings["cuda-mix"]
    assert "conflict-unread" not in warnings
    assert default.range_requests >= 2 and not (tmp_path / "xdg/provision/wheels").exists()  # RECORDs by range only
    assert len(list((tmp_path / "xdg/provision/records").iterdir())) == 3  # kept by sha256: a second lock reads none
    before = default.range_requests
    table = run_provision(*argv, env=env, cwd=tmp_path)
    assert table.returncode == 0 and "warning (conflict): cuda_bindings-13.5.0" in table.stdout.replace("\n", " ")
    assert default.range_requests == before  # no RECORD read again
    # records/ removed: the RECORDs are read again, early (the lock being replaced names them before uv answers), and
    # each once in the run, though the early reads, uv's answer and the gate all ask for them
    import shutil

    shutil.rmtree(tmp_path / "xdg/provision/records")
    again = run_provision(*argv, "--json", env=env, cwd=tmp_path)
    assert again.returncode == 0 and {w["id"] for w in json.loads(again.stdout)["warnings"]} == set(warnings)
    assert default.range_requests - before == before  # as many range requests as the first lock: none twice


def test_what_is_meant_to_sit_side_by_side_is_not_a_failure() -> None:
    """nvidia-cutlass-dsl 4.8.0 requires its -libs-cu12 beside -libs-cu13 (SGLang 0.5.23's stack locks both), and
    flashinfer-python 0.7.2 and torch-c-dlpack-ext 0.1.5 each ship a stray top-level build_backend.py: neither splits
    a package. nvidia-cudnn-cu12 beside cu13 libraries still is a mix."""
    stack = [("torch", "2.14.1"), ("cuda-bindings", "13.4.4"), ("nvidia-cutlass-dsl-libs-cu12", "4.8.0"),
             ("nvidia-cutlass-dsl-libs-cu13", "4.8.0")]
    assert lockcheck.cuda_mix(stack) == ""
    assert "CUDA 12: nvidia-cudnn-cu12 9.10.2.21" in lockcheck.cuda_mix([*stack, ("nvidia-cudnn-cu12", "9.10.2.21")])
    (loose,) = lockcheck.conflicts({"flashinfer.whl": {"build_backend.py": "sha256=a"}, "dlpack.whl": {"build_backend.py": "sha256=b"}})
    assert loose.loose
    (split,) = lockcheck.conflicts({"a.whl": {"build_backend.py": "sha256=a", "cuda/bindings/x.py": "sha256=1"},
                                    "b.whl": {"build_backend.py": "sha256=b", "cuda/bindings/x.py": "sha256=2"}})
    assert not split.loose and split.path == "cuda/bindings/x.py" and split.count == 2
