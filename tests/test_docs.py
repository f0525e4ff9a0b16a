"""The README lists what the code declares (names declared once, documented from there)."""

from __future__ import annotations

import re
from pathlib import Path

from langgraph_loop.core.settings import OVERRIDES

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_lists_exactly_the_per_run_overrides_loop_context_declares() -> None:
    text = README.read_text()
    section = text.split("### Per-run overrides (`context=`)", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"`([a-z_]+)`", section.split("Invalid values", 1)[0])
    assert listed == list(OVERRIDES)
