"""The README a new user reads first: title, what and why, then the two set-up commands; short.

Prose is not pinned here; links and code blocks are checked for every page in tests/docs/test_docs.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.docs.test_docs import README, blocks

TEXT = README.read_text()
LIMIT = 20_000  # bytes: details live in docs/ and benchmarks/README.md


def test_title_then_what_and_why_then_the_two_set_up_commands() -> None:
    lines = TEXT.splitlines()
    assert lines[0] == "# langgraph-loop" and lines[1] == ""
    end = lines.index("", 2)
    intro = lines[2:end]
    assert intro and not any(line.startswith(("#", "```", "|", "<", "    ")) for line in intro)
    rest = [line.strip() for line in lines[end:] if line.strip()]
    commands = [line for line in rest[:4] if not line.startswith("```")]
    assert commands[:2] == ["make demo", "make test"]


def test_next_to_the_commands_it_says_what_make_test_may_install() -> None:
    setup = TEXT.split("\n## ", 1)[0]
    for name in ("make demo", "OPENAI_API_KEY", "OPENAI_BASE_URL", "apt-get install postgresql",
                 "apt-get install redis-server", "LANGGRAPH_LOOP_TEST_PG_URI"):
        assert name in setup, name


def test_the_readme_is_at_most_20_kb() -> None:
    assert len(README.read_bytes()) <= LIMIT, len(README.read_bytes())


def test_the_offline_quickstart_the_wheel_test_runs_shows_its_output() -> None:
    """tests/ecosystem/test_wheel.py runs the first python block after this phrase from the built wheel."""
    start = TEXT.index("Offline, swap the model")
    line = TEXT.count("\n", 0, start) + 1
    block = next(b for b in blocks(README) if b.lang == "python" and b.line > line)
    assert not block.before.startswith("<!--")  # it runs
    assert block.output is not None and block.output.strip() == "completed Paris: 18°C, cloudy."


def test_the_sections_a_user_looks_for_are_there() -> None:
    headings = [line for line in TEXT.splitlines() if line.startswith("## ")]
    for name in ("## Install", "## Quickstart", "## Coming from `create_agent`",
                 "## Configuration reference", "## Benchmarks", "## Development"):
        assert name in headings, name
    assert headings.index("## Install") < headings.index("## Quickstart")
    assert Path(README.parent / "benchmarks" / "README.md").is_file()


def test_right_after_the_two_commands_a_user_reads_how_to_install_it() -> None:
    """Issue 43.12: a user of the library meets ``pip install`` before the developer set-up."""
    after = TEXT.split("make test\n```\n", 1)[1].lstrip("\n").split("\n\n", 1)[0]
    assert after.startswith("Using it in your own project? `pip install .` in a checkout")
    assert "[Install](#install)" in after and "make" not in after.replace("no `make` needed", "")
