"""Serve the tests' one-package index (alpha 1.0, tests/wheelhouse.py) on 127.0.0.1 for r-nvml.sh: print its URL,
then serve until killed. The GPU machine reaches no registry; `create` of the tiny profile locks and installs from here."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from wheelhouse import IndexServer

server = IndexServer(Path(sys.argv[1]))
index = server.index("tiny")
index.add("alpha", "1.0")
print(index.url, flush=True)
while True:
    time.sleep(60)
