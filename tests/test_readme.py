"""The README a new user reads first: what and why, the two set-up commands, then details;
nothing it cites lies outside the repository, and the benchmark machine is named."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_title_then_three_sentences_then_the_two_set_up_commands() -> None:
    lines = README.splitlines()
    assert lines[0] == "# langgraph-loop"
    blank = lines.index("", 2)
    intro = " ".join(lines[2:blank])
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", intro) if s]
    assert len(sentences) == 3, sentences
    assert "create_agent" in intro  # why this over create_agent + middleware
    commands = [line.strip() for line in lines[blank + 1:blank + 4] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_where_the_commands_are_it_says_make_test_may_install_postgresql_and_redis() -> None:
    setup = README.split("## Install", 1)[0]
    assert "**`make test` may install them**" in setup
    assert "apt-get install postgresql" in setup and "apt-get install redis-server" in setup
    assert "LANGGRAPH_LOOP_TEST_PG_URI" in setup


def test_nothing_outside_the_repository_is_cited() -> None:
    assert "../" not in README and "shared/anchors" not in README
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith(("http://", "https://")):
            assert (REPO / target).exists(), target


def test_the_benchmark_machine_is_named_not_this_vm() -> None:
    assert not re.search(r"\bthis (2-core )?VM\b", README)
    assert "2-core x86_64 Linux VM (AMD EPYC, 24 GiB RAM, Python 3.11.7)" in " ".join(README.split())
