from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from wheelhouse import IndexServer  # noqa: E402

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent


@pytest.fixture
def index_server(tmp_path: Path) -> Iterator[IndexServer]:
    server = IndexServer(tmp_path / "indexes")
    yield server
    server.close()


@pytest.fixture
def provision_bin() -> str:
    """The installed `provision` console script, run as a real process."""
    found = shutil.which("provision", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert found, "provision is not installed in this environment: pip install -e '.[test]'"
    return found
