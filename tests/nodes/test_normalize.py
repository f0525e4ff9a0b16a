"""Result identity: ``normalize`` (about one pass) replaces exactly what ``VOLATILE``'s
substitutions in a row replace, on real results and on random texts made of volatile pieces;
a large result is normalized once however many times it is hashed."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from langgraph_loop.nodes import loop_detection
from langgraph_loop.nodes.loop_detection import VOLATILE, content_hash, normalize

DATA = Path(__file__).parents[2] / "benchmarks" / "data"
PIECES = ["2025-11-19", "00:04:32", "12:30", "1:02:03", ".5", "3.5", "+05:30", "-0800", "Z", "T",
          "t", " ", "\n", "\t", ".", "-", ":", "'", "=", "/", "_", "+", "1", "12", "2025", "0",
          "59", "123456", "1700000000", "1700000000123", "١٢", "abcdef12", "deadbeef",
          "abcdef12-1234-1234-1234-123456789abc", "abcd-abcd-", "0x1234", "0x", "0X", "x", "X",
          "ms", "s", "sec", "secs", "seconds", "min", "mins", "minutes", "MS", "S", "Sec", "9ms",
          "4 s", "tmp", "TMP", "/tmp/", "/var/folders/", "call", "toolu", "msg", "lc", "pid",
          "PID", "bash", "sh: line ", "random seed:", "id", "ID", "a", "ab", "b", "z", "é", "ſ",
          "İ"]


def one_by_one(text: str) -> str:
    """The reference: every ``VOLATILE`` substitution over the whole text, in order."""
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def test_normalize_agrees_with_the_substitutions_on_random_volatile_texts() -> None:
    rng = random.Random(31)
    for _ in range(5_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 30)))
        assert normalize(text) == one_by_one(text), text


def test_normalize_agrees_with_the_substitutions_on_real_results() -> None:
    excerpts = json.loads(gzip.decompress((DATA / "minisweagent_gemini-3-pro_excerpts.json.gz").read_bytes()))
    airline = json.loads(gzip.decompress((DATA / "taubench_gpt-4o_airline.json.gz").read_bytes()))
    texts = [m["content"] for s in excerpts["simulations"] for m in s["messages"]]
    texts += [m["content"] for run in airline[:40] for m in run["traj"]]
    texts = [t for t in texts if isinstance(t, str) and t]
    assert len(texts) > 1000
    for text in texts:
        assert normalize(text) == one_by_one(text)


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
