"""The documentation's links resolve and its code runs (README.md, docs/, benchmarks/README.md).

Checked: every relative link points at a file in the repository (and a ``#anchor`` at a heading
of that file); nothing outside the repository is cited; every ```python block runs as it is,
and prints what the ```text block right after it shows, unless the line before it says why it
cannot run (``<!-- not run: reason -->``, e.g. it needs a server or an API key). The README lists
exactly the per-run override groups and fields ``LoopContext`` declares.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from typing_extensions import is_typeddict

from langgraph_loop.core.overrides import GROUPS

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "README.md"]

FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->$")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    before: str  # the last non-blank line before the fence
    output: str | None  # a ```text block right after it: what it prints

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, each with its context."""
    text = page.read_text()
    found = list(FENCE.finditer(text))
    result = []
    for i, match in enumerate(found):
        head = text[:match.start()].rstrip().splitlines()
        after = found[i + 1] if i + 1 < len(found) else None
        output = (after.group(2) if after is not None and after.group(1) == "text"
                  and not text[match.end():after.start()].strip() else None)
        result.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group(1),
                            match.group(2), head[-1].strip() if head else "", output))
    return result


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings make (repeats get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    result = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", page.read_text()), re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def resolves(file: Path, anchor: str) -> bool:
    """``file`` is in the repository, and so is ``anchor`` among its headings."""
    if not file.is_relative_to(REPO) or not file.is_file():
        return False
    return not anchor or (file.suffix == ".md" and anchor in anchors(file))


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


PYTHON = [b for page in PAGES for b in blocks(page) if b.lang == "python"]
RUNNABLE = [b for b in PYTHON if not b.before.startswith("<!--")]


def test_every_page_exists_and_the_docs_folder_is_there() -> None:
    assert all(page.is_file() for page in PAGES)
    assert {p.name for p in PAGES} >= {"deployment.md", "reliability.md", "architecture.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_to_a_file_in_the_repository(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not resolves(file, anchor):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_outside_the_repository_is_cited(page: Path) -> None:
    text = page.read_text()
    assert "shared/" not in text and "/work/" not in text
    if page == README:
        assert "../" not in text


def test_every_python_block_that_does_not_run_says_why() -> None:
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.startswith("<!--") and "not run" in line:
                match = NOT_RUN.match(line.strip())
                assert match and len(match.group(1).split()) >= 2, (
                    f"{page.name}:{number + 1}: give a reason: <!-- not run: reason -->")
                assert lines[number + 1] == "```python", (
                    f"{page.name}:{number + 1}: a not-run note goes right before its ```python block")
    assert all(NOT_RUN.match(b.before) for b in PYTHON if b.before.startswith("<!--"))


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.name)
def test_every_python_block_runs_and_prints_what_the_page_shows(block: Block,
                                                                tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, f"{block.name} failed:\n{proc.stderr[-3000:]}"
    if block.output is not None:
        assert proc.stdout.strip() == block.output.strip(), f"{block.name} printed:\n{proc.stdout}"


def test_the_readme_lists_exactly_the_per_run_overrides_loop_context_declares() -> None:
    text = README.read_text()
    section = text.split("### Per-run overrides", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z_]+)` \| (.+) \|$", section, re.M)}

    def declared(schema: Any) -> str:
        hints = get_type_hints(schema)
        return ", ".join(f"`{n}` ({declared(h)})" if is_typeddict(h) else f"`{n}`"
                         for n, h in hints.items())

    assert rows == {group: declared(schema) for group, (_model, schema) in GROUPS.items()}
