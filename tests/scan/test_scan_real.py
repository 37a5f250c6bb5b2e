"""The scan against NVIDIA's cuobjdump on real wheels from the default registry (marked network; cached).

Small wheels only (CI has 2 cores): bitsandbytes 0.50.2 (43 MB: shared libraries with a relocatable copy) and the
CUDA 12.9 nvcc wheel (40 MB: its ptxas builds the CUDA 12.9 bare cubins whose `a` lives in e_flags).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuobjdump import as_cuobjdump, cuobjdump, disagreements, listing, unpacked, wheel

from provision.scan import binaries as scan

pytestmark = pytest.mark.network
BITSANDBYTES = "bitsandbytes==0.50.2"
NVCC_129 = "nvidia-cuda-nvcc-cu12==12.9.86"
PTX = """.version 8.8
.target {target}
.address_size 64
.visible .entry k(.param .u64 x)
{{
  .reg .b64 %rd<3>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [x];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.f32 %f1, [%rd2];
  add.f32 %f2, %f1, %f1;
  st.global.f32 [%rd2], %f2;
  ret;
}}
"""


def test_whole_folders_agree_with_cuobjdump() -> None:
    tool = cuobjdump()
    for requirement in (BITSANDBYTES, NVCC_129):
        compared, problems, failed = disagreements(tool, unpacked(requirement))
        assert problems == [], requirement
        # cuobjdump 13.5 itself stops on the CUDA 12.1 cubins of _cuda121.so and on files without fatbins it cannot read
        assert len(failed) <= 3 and compared >= 2, (requirement, failed)


def test_relocatable_copy_of_real_libraries() -> None:
    folder = unpacked(BITSANDBYTES)
    library = next(folder.glob("bitsandbytes/libbitsandbytes_cuda130.so"))
    code = scan.code_in_file(library)
    assert all(number == 1 for number in code.loadable.cubin.values()) and not code.loadable.ptx
    assert code.relocatable.ptx and sum(code.relocatable.cubin.values()) > sum(code.loadable.cubin.values())
    assert as_cuobjdump(code.loadable) == listing(cuobjdump(), library)


def test_wheel_in_place_equals_the_unpacked_folder() -> None:
    in_place = scan.scan([wheel(BITSANDBYTES)])
    unpacked_scan = scan.scan([unpacked(BITSANDBYTES)])
    assert {f.path.split("!")[1]: f.code for f in in_place.files} == {
        str(Path(f.path).relative_to(unpacked(BITSANDBYTES))): f.code for f in unpacked_scan.files
    }
    (row,) = in_place.packages
    assert (row.name, row.version) == ("bitsandbytes", "0.50.2")


@pytest.mark.parametrize("target", ["sm_100a", "sm_100", "sm_90a", "sm_120a"])
def test_cuda_12_9_bare_cubins_keep_their_a(tmp_path: Path, target: str) -> None:
    (ptxas,) = unpacked(NVCC_129).glob("nvidia/cuda_nvcc/bin/ptxas")
    source = tmp_path / "k.ptx"
    source.write_text(PTX.format(target=target))
    cubin = tmp_path / f"{target}.cubin"
    subprocess.run([str(ptxas), f"-arch={target}", "-o", str(cubin), str(source)], check=True, timeout=120)
    assert dict(scan.counts_in_file(cubin).cubin) == {target: 1}
    assert listing(cuobjdump(), cubin) == ({target: 1}, {})
