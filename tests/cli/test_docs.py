"""The Markdown the project ships reads as one document each: one top-level heading, and no paragraph written twice
(a scripted edit once pasted docs/performance.md whole into one of its own table rows)."""

from __future__ import annotations

import re

from conftest import ROOT

SHIPPED = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "contrib").rglob("README.md")])


def test_each_document_has_one_title_and_no_paragraph_twice() -> None:
    for path in SHIPPED:
        # a shell comment in a block is no title
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
        titles = [line for line in text.splitlines() if line.startswith("# ")]
        assert len(titles) == 1, (path, titles)
        paragraphs = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 200]
        twice = {p[:80] for p in paragraphs if paragraphs.count(p) > 1}
        assert not twice, (path, twice)
