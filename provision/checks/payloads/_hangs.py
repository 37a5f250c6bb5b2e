"""What counts as a hung all-reduce, and what to say about one: one formula for provision's own ranks
(bench_allreduce.py, through _common.launch) and for NVIDIA's all_reduce_perf run beside them
(provision/checks/nccl_tests.py). Stdlib only and no side effects: the environment's Python imports it as `_hangs`,
provision as `provision.checks.payloads._hangs`."""

from __future__ import annotations

START_BOUND_S = 300.0  # start-up: the process group or communicators, before the first size
ALLOWANCE_S = 60.0  # per size: graph capture and NCCL's lazy set-up of a new size
SLOWEST_BYTES_PER_S = 0.5e9  # PCIe through a busy root complex: slower than any working link

HANG_HINT = (
    "check peer-to-peer access between the GPUs (nvidia-smi topo -p2p r), PCIe ACS and the IOMMU "
    "(NVIDIA/nccl#606, #2079; nccl-tests#117); NCCL_P2P_DISABLE=1 tells whether P2P is the cause"
)


def step_bound_s(size: int, ops: int, allowance_s: float = ALLOWANCE_S) -> float:
    """How long one size may take before it counts as a hang: a fixed allowance for graph capture and lazy NCCL
    set-up, plus every op moving 2 x size bytes at a pessimistic 0.5 GB/s."""
    return allowance_s + ops * 2 * max(size, 1) / SLOWEST_BYTES_PER_S
