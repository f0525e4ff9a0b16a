"""Result identity: a large result is normalized once however many times it is hashed, never when
it cannot equal another once normalized; normalization keeps the line count; ``is_empty`` reads what
the markup-stripping definition reads."""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from langgraph_loop import StopReason, create_loop_agent
from langgraph_loop.core.messages import digest
from langgraph_loop.engine import detection as loop_detection
from langgraph_loop.engine.detection import _MARKUP, HASH_LEN, content_hash, is_empty, normalize
from langgraph_loop.scripted import ScriptedChatModel

PIECES = ["2025-11-19", "00:04:32", "12:30", "1:02:03", ".5", "3.5", "+05:30", "-0800", "Z", "T",
          "t", " ", "\n", "\t", ".", "-", ":", "'", "=", "/", "_", "+", "1", "12", "2025", "0",
          "59", "123456", "1700000000", "1700000000123", "١٢", "abcdef12", "deadbeef",
          "abcdef12-1234-1234-1234-123456789abc", "abcd-abcd-", "0x1234", "0x", "0X", "x", "X",
          "ms", "s", "sec", "secs", "seconds", "min", "mins", "minutes", "MS", "S", "Sec", "9ms",
          "4 s", "tmp", "TMP", "/tmp/", "/var/folders/", "call", "toolu", "msg", "lc", "pid",
          "PID", "bash", "sh: line ", "random seed:", "id", "ID", "a", "ab", "b", "z", "é", "ſ",
          "İ",
          # what the class string merges or spells: re.IGNORECASE's non-ASCII i, s, k; spaces beyond
          # a blank; word characters and symbols beyond Latin-1; a lone surrogate; its own marker
          "ı", "mİn", "ıd=", "\u212a", "\x1c", "\xa0", "\u2028", "\u3000", "\ud800", "ª", "中", "│", "✓",
          "\x82", "/private", "da", "zsh", "random", " seed: ", "toolu_", "call-", "lc_", "block",
          "resp", "req", "run", "chatcmpl", "abcdefgh", "tmp_1234"]


def test_a_large_result_hashed_twice_is_normalized_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted(text: str) -> str:
        calls.append(len(text))
        return normalize(text)

    monkeypatch.setattr(loop_detection, "normalize", counted)
    big = "".join(f"{i} passed in 0.{i % 97:02d}s at 2025-11-19T00:04:{i % 60:02d}\n"
                  for i in range(1500))
    assert len(big) > 50_000
    again = big.replace("0.01s", "0.02s")  # the same result, another run's timings
    assert content_hash(big) == content_hash(big) == content_hash(again)
    assert calls == [len(big), len(again)]
    assert content_hash(big) != content_hash(big.replace("1499 passed", "1499 failed"))
    for i in range(loop_detection.MEMO_RESULTS):  # bounded: the oldest are forgotten
        content_hash(f"result {i}")
    assert len(loop_detection._MEMO) == loop_detection.MEMO_RESULTS


def test_content_hash_is_the_digest_of_the_normalized_text() -> None:
    plain = "no volatile part here\n" * 400  # its memo key's digest is its hash
    timed = plain + "Ran 4 tests in 0.012s\n"
    for text in (plain, timed, plain[:100], timed[-100:]):
        assert content_hash(text) == digest(normalize(text), HASH_LEN)


def test_is_empty_reads_what_stripping_the_markup_reads() -> None:
    pieces = ["<a>", "<returncode>0</returncode>", "0", "00", " ", "\n", "\t", "\xa0", "<", ">", "x",
              f"<{'a' * 40}>", f"<{'a' * 41}>", "<a\nb>", "<<a>", "<a>>", "1", "\u2028"]
    rng = random.Random(3)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert is_empty(text) == (_MARKUP.sub("", text).strip() in ("", "0")), text


def test_normalization_never_adds_or_removes_a_line_break() -> None:
    """What lets the detector skip normalizing two results of different line counts."""
    rng = random.Random(7)
    for _ in range(5_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 30)))
        assert normalize(text).count("\n") == text.count("\n"), text
    assert normalize("took 5\nms, then 5 ms") == "took 5\nms, then <duration>"  # a unit on the next line


def _build_log(run: int, lines: int, *, stamp: int) -> str:
    """A coding agent's build output: ~60 characters a line, timings and times in each."""
    return "\n".join(f"2025-11-19 00:{stamp % 60:02d}:{i % 60:02d} [run {run}] compiled src/mod_{i}.py "
                     f"in {stamp + i}ms" for i in range(lines))


def _counted_normalize(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def counted(text: str) -> str:
        calls.append(len(text))
        return normalize(text)

    monkeypatch.setattr(loop_detection, "normalize", counted)
    return calls


def _build_agent(outputs: list[str], scripted: list[ScriptedChatModel]) -> Any:
    @tool
    def build(target: str) -> str:
        """Build a target."""
        return outputs.pop(0)

    script = [[("build", {"target": f"t{i % 2}"})] for i in range(len(outputs))] + ["built"]
    model = ScriptedChatModel(script=script)
    scripted.append(model)
    return create_loop_agent(model, [build])


def test_distinct_large_outputs_are_compared_as_texts_and_never_normalized(
        monkeypatch: pytest.MonkeyPatch, scripted: list[ScriptedChatModel]) -> None:
    """Issue 31: result identity costs about what reading costs. Two calls alternate, each
    returning a new 10-50 KB output every time (different line counts): nothing to normalize."""
    calls = _counted_normalize(monkeypatch)
    outputs = [_build_log(run, 170 + 70 * run, stamp=run) for run in range(10)]
    assert min(map(len, outputs)) > 10_000
    result = _build_agent(outputs, scripted).invoke({"messages": [HumanMessage("build it")]})
    assert result["stop_reason"] == StopReason.COMPLETED
    assert calls == []


def test_outputs_that_differ_only_in_timings_are_the_same_result(
        monkeypatch: pytest.MonkeyPatch, scripted: list[ScriptedChatModel]) -> None:
    """The same build re-run, only its times and timings new: normalized (same line count),
    found to be the same result, and the loop is stopped."""
    calls = _counted_normalize(monkeypatch)
    outputs = [_build_log(0, 300, stamp=7 * run) for run in range(10)]
    assert len(set(outputs)) == 10
    result = _build_agent(outputs, scripted).invoke({"messages": [HumanMessage("build it")]})
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert calls and all(n > 10_000 for n in calls)
