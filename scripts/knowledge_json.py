"""Write provision/knowledge.json from provision/knowledge.toml (the tables' one source, with their citations).

    python scripts/knowledge_json.py

knowledge.toml is what people edit; knowledge.json is what provision reads: the same tables, parsed by json's C
scanner in a tenth of a millisecond where tomllib's import and parse cost `probe` about 5 ms of CPU (its whole process
has 0.15 s on the GPU machine). tests/report/test_knowledge.py fails when the two differ, naming this command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from provision import toml  # noqa: E402 - this checkout's, not an installed one

TOML = ROOT / "provision" / "knowledge.toml"
JSON = ROOT / "provision" / "knowledge.json"


def text() -> str:
    """knowledge.json's text for knowledge.toml as it is now."""
    return json.dumps(toml.loads(TOML.read_text(encoding="utf-8")), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    JSON.write_text(text(), encoding="utf-8")
    print(f"wrote {JSON.relative_to(ROOT)}")
