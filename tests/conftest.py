"""Fixtures every test shares.

Isolation (autouse, nothing to ask for): each test runs with no UV_*, PIP_* or PROVISION_* variable inherited from the
shell, PROVISION_HOME (and XDG_DATA_HOME) in a temporary folder of its own (`isolated.home`), and a uv cache
(UV_CACHE_DIR) of its own, empty. A test that wants warm wheels asks for `shared_uv_cache` (directly or through a
fixture that does): it then uses one cache for the whole run, which is also the cache session- and module-scoped
fixtures run with.

Starting provision: `from launch import run_provision, popen_provision` (tests/launch.py) -- the installed console
script, a real process, in the isolated environment; run_provision forks it from a provision that imported itself once
(tests/forkserver.py; PROVISION_TEST_EXEC=1 exec's every command instead). `provision_bin` is the same binary's path, for what must name it
(an Ansible inventory).

Indexes: `index_server` serves indexes on 127.0.0.1 for one test (`hostile` a server that misbehaves as told); `session_index_server` is one server for the whole
session (give each index a name no other test uses: `session_index_server.index(unique_name)`).

Bytecode: the processes tests start write theirs under the session's folder (PYTHONPYCACHEPREFIX), never beside the
sources. Temporary files: each session has a folder of its own (`--basetemp` when not given), removed at the end when every test
passed: pytest's shared /tmp/pytest-of-USER keeps only the last 3 sessions, so sessions running side by side deleted
each other's environments mid-run.

Markers (strict): `network` (the public package registry), `gpu` (skipped without an NVIDIA GPU), `slow` (more than a
few seconds: `-m "not slow"` for a quick pass). Tests marked `slow` or `network` run first.

Processes: pytest-xdist runs the tests in 4 processes (pyproject's addopts; `-n 0` for one). They share the run's folder
(`run_folder`): its bytecode and `shared_uv_cache`; everything else of a test is its own (ports, homes, folders). What
takes minutes to make and is only read (the gloo sweeps) is made once per run through `once_per_run`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import launch
from hostile_http import HostileServer
from wheelhouse import IndexServer

if TYPE_CHECKING:
    import fulldisk
    import tiny

# A run started in the background (`.ci/run &`, nohup) inherits SIGINT ignored, and so would every provision the tests
# start: the Ctrl-C tests would then see it finish instead of stop. Tests start children with SIGINT at its default,
# as a terminal's Ctrl-C finds them (a handler, unlike SIG_IGN, is not inherited across exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DATA = Path(__file__).parent / "data"
# The tests are laid out by command (tests/create/, tests/lock/, ...; tests/cli/ for the command line as a whole); a
# test module that borrows another's helpers (`from test_lockscan import cubin`) finds it in whichever folder it is.
for _folder in sorted(Path(__file__).parent.iterdir()):
    if _folder.is_dir() and any(_folder.glob("test_*.py")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))
ROOT = Path(__file__).parent.parent
INHERITED = ("UV_", "PIP_", "PROVISION_")


@dataclass(frozen=True)
class Isolation:
    home: Path  # PROVISION_HOME
    uv_cache: Path  # UV_CACHE_DIR


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the whole run: the session's own, or with pytest-xdist the one its worker processes share."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, bool]]:
    """A folder of the run (`run_folder`/NAME) that one test process fills while the others wait on its lock: yields
    (folder, whether this process fills it). What takes minutes is made once however many processes need it."""
    folder = run_folder(tmp_path_factory) / name
    with open(folder.with_name(f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if this process dies
        done = folder / ".done"
        fill = not done.exists()
        if fill:
            shutil.rmtree(folder, ignore_errors=True)  # what a process that failed left
            folder.mkdir(parents=True)
        yield folder, fill
        if fill:
            done.touch()


@pytest.fixture(scope="session")
def shared_uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uv cache for the run (uv locks it for processes side by side): ask for it to reuse wheels other tests
    unpacked."""
    return run_folder(tmp_path_factory) / "uv-cache-shared"


@pytest.fixture(scope="session", autouse=True)
def _session_isolation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # the shared cache by its path, not as the fixture: an autouse fixture's dependency is in every test's fixturenames,
    # and `isolated` then gave every test the shared cache (a test that edits uv's cache reached the others' wheels)
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(INHERITED):
                patch.delenv(name)
        patch.setenv("UV_CACHE_DIR", str(run_folder(tmp_path_factory) / "uv-cache-shared"))
        # The tests start provision about a thousand times: its bytecode is compiled once, into the session's folder
        # (never beside the sources), even where PYTHONDONTWRITEBYTECODE would compile every module in every process.
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        # written atomically
        patch.setenv("PYTHONPYCACHEPREFIX", str(run_folder(tmp_path_factory) / "pycache"))
        yield


@pytest.fixture(autouse=True)
def isolated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Isolation]:
    """A temporary provision home, uv cache and XDG cache for this test; no inherited UV_/PIP_/PROVISION_ variables.
    What the test's own process gave wheelfacts.put_later is written when it ends, into that test's cache (a test
    calling wheelrecords in process left it for the next test's settle)."""
    for name in list(os.environ):
        if name.startswith(INHERITED):
            monkeypatch.delenv(name)
    data = tmp_path_factory.mktemp("data")
    shared = "shared_uv_cache" in request.fixturenames
    cache = request.getfixturevalue("shared_uv_cache") if shared else tmp_path_factory.mktemp("uv-cache")
    home = data / "provision"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    # provision's own caches (fetched wheels, scans/, records/: provision/wheelfacts.py) are the test's: a wheel built
    # the same way in another test, or an earlier run, has the same sha256, and its entry would answer for it
    monkeypatch.setenv("XDG_CACHE_HOME", str(data / "cache"))
    monkeypatch.setenv("PROVISION_HOME", str(home))
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    yield Isolation(home, cache)
    facts = sys.modules.get("provision.wheelfacts")
    if facts is not None:
        facts.settle()


_OWN_BASETEMP = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.option.basetemp:
        config.option.basetemp = tempfile.mkdtemp(prefix="provision-tests-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own and exitstatus == 0:
        shutil.rmtree(own, ignore_errors=True)


# measured: scripts/slow_tests.py writes it from a --durations run
SLOW = Path(__file__).with_name("slow_tests.txt")


def _measured_slow() -> set[str]:
    """The tests (file::function, parameters aside) measured at 0.8 s or more: the quick tier leaves them out."""
    try:
        return {
            line.strip()
            for line in SLOW.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
    except OSError:
        return set()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    measured = _measured_slow()
    for item in items:  # `pytest -m "not slow and not network"`: the quick tier (README)
        if item.nodeid.split("[", 1)[0] in measured and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # the long tests first, so that the processes of pytest-xdist finish together instead of waiting on one of them
    items.sort(key=lambda item: not (item.get_closest_marker("slow") or item.get_closest_marker("network")))
    if any(item.get_closest_marker("gpu") for item in items) and not _nvidia_gpu():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (marked gpu)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


def _nvidia_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount()) > 0
    except Exception:
        return False


@pytest.fixture
def index_server(tmp_path: Path) -> Iterator[IndexServer]:
    server = IndexServer(tmp_path / "indexes")
    yield server
    server.close()


@pytest.fixture(scope="session")
def session_index_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    server = IndexServer(tmp_path_factory.mktemp("session-indexes"))
    yield server
    server.close()


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    """A server on 127.0.0.1 that answers each path as its Route says (tests/hostile_http.py): trickles, lies, loops."""
    server = HostileServer()
    yield server
    server.close()


@pytest.fixture
def provision_bin() -> str:
    """The installed `provision` console script (tests start it through launch.run_provision)."""
    assert launch.BINARY, "provision is not installed in this environment: pip install -e '.[test]'"
    return launch.BINARY


@pytest.fixture
def tool(
    request: pytest.FixtureRequest, tmp_path: Path, provision_bin: str, index_server: IndexServer
) -> tiny.Tool:
    """A home in tmp_path with profile `tiny` served on 127.0.0.1 (tests/tiny.py); a module that says
    `TOOL_WITH_ENV = True` gets environment tiny made in it too. One fixture where thirteen modules had a copy; a module
    that needs another setup defines its own `tool`."""
    import tiny

    if getattr(request.module, "TOOL_WITH_ENV", False):
        return tiny.tool_with_env(tmp_path, provision_bin, tiny.index(index_server))
    return tiny.make_tool(tmp_path, provision_bin, tiny.index(index_server))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[..., fulldisk.Disk]]:
    """Make a real small disk over a folder (a tmpfs in a namespace of its own, tests/fulldisk.py), carrying what the
    folder holds when asked for: `small_disk(tmp_path / "disk")`, or with size="8m", inodes=3000. Skipped, before
    anything is made, where `unshare -rm` is not permitted."""
    import fulldisk

    why = fulldisk.unavailable(tmp_path / ".probe")
    if why is not None:
        pytest.skip(f"a real full disk cannot be made here: {why}")
    made: list[fulldisk.Disk] = []

    def make(mount: Path, size: str = "16m", inodes: int | None = None) -> fulldisk.Disk:
        made.append(fulldisk.Disk(mount, size, inodes))
        return made[-1]

    yield make
    for disk in made:
        disk.close()
