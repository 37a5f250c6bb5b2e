"""The ranks' rendezvous takes no port chosen ahead: rank 0's store binds the port the kernel gives it and publishes it
to the others, so another process that takes a port chosen ahead (free_port's: bind 0, close, tell the number) before
rank 0 binds it cannot stop the ranks meeting. Proven with real ranks (gloo on CPUs, torch's CPU build on this
machine's disk), every port chosen ahead taken by a listener of this test's."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import once_per_run
from test_allreduce import CPU_TORCH, cpu_torch_venv

from provision.checks import payload_dir


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CPU_TORCH:
        pytest.skip("no CPU build of torch on this machine's disk")
    with once_per_run(tmp_path_factory, "rendezvous-torch") as (base, fill):
        return cpu_torch_venv(base / "venv") if fill else base / "venv" / "bin/python"


@pytest.fixture
def taken() -> Iterator[socket.socket]:
    """A port another process holds, listening (what free_port's number can be by the time it is bound)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


@pytest.mark.timeout(300)
def test_ranks_meet_though_a_port_chosen_ahead_was_taken(
    torch_python: Path, taken: socket.socket, tmp_path: Path
) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(payload_dir())!r})\n"
        "import _common\n"
        "from _common import emit, init_group, launch, write_rank\n"
        f"_common.free_port = lambda: {taken.getsockname()[1]}  # taken between its choice and rank 0's bind\n"
        "def target(rank, world, out_dir, config):\n"
        "    import torch\n"
        "    dist = init_group(rank, world, out_dir, 'gloo')\n"
        "    value = torch.tensor([float(rank + 1)])\n"
        "    dist.all_reduce(value)\n"
        "    dist.destroy_process_group()\n"
        "    write_rank(out_dir, rank, {'rank': rank, 'sum': value.item()})\n"
        "if __name__ == '__main__':\n"
        "    results = launch(target, 2, {'start_bound_s': 60}, 240.0)\n"
        "    emit('pass', 'met', ranks=results)\n"
    )
    done = subprocess.run([torch_python, str(script)], capture_output=True, text=True, timeout=280)
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "pass", (verdict, done.stderr[-2000:])
    assert [r.get("sum") for r in verdict["details"]["ranks"]] == [3.0, 3.0], verdict
