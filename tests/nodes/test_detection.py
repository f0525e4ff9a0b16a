"""Loop detection layers as pure functions: signatures, repeats, cycles, no progress,
per-tool caps, warning bookkeeping and the size of the detector state."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from langgraph_loop.core.config import ArgPolicy, LoopDetection
from langgraph_loop.nodes.detection import Observation, cycle_of, observe
from langgraph_loop.nodes.detector_state import call_signature, response_signature, sign_calls

_IDS = itertools.count(1)
Calls = Sequence[tuple[str, dict[str, Any]]]
Result = tuple[str, str]  # a tool result's content and status


def reply(calls: Calls, invalid: Sequence[tuple[str, str]] = ()) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{next(_IDS)}"}
                                     for n, a in calls],
                     invalid_tool_calls=[{"name": n, "args": raw, "id": f"c{next(_IDS)}",
                                          "error": "bad JSON", "type": "invalid_tool_call"}
                                         for n, raw in invalid])


class Sim:
    """Feeds responses to ``observe`` the way the graph does, with scripted results.

    ``results``: "none" (never feed results), "same" (every call of a signature returns
    the same text) or "fresh" (every execution returns something new).
    """

    def __init__(self, config: LoopDetection | None = None, results: str = "none") -> None:
        self.config = config or LoopDetection()
        self.mode = results
        self.det: dict[str, Any] = {}
        self.pending: list[ToolMessage] = []
        self.counter = itertools.count()

    def output(self, name: str, args: dict[str, Any], mode: str | None) -> str:
        if (mode or self.mode) == "fresh":
            return f"{name} result #{next(self.counter)}"
        return f"{name}{json.dumps(args, sort_keys=True)} is always the same"

    def step(self, calls: Calls, *, results: str | None = None,
             invalid: Sequence[tuple[str, str]] = (),
             returns: Sequence[Result] | None = None) -> Observation:
        """One response; ``returns`` gives each call's (content, status) explicitly."""
        ai = reply(calls, invalid)
        obs = observe(self.det, ai, self.pending, self.config)
        self.det = dict(obs.state)
        if returns is not None:
            self.pending = [ToolMessage(text, tool_call_id=c["id"], status=status)  # type: ignore[arg-type]
                            for c, (text, status) in zip(ai.tool_calls, returns, strict=True)]
        elif (results or self.mode) == "none":
            self.pending = []
        else:
            self.pending = [ToolMessage(self.output(c["name"], c["args"], results),
                                        tool_call_id=c["id"]) for c in ai.tool_calls]
        return obs

    def run(self, responses: Sequence[Calls]) -> list[Observation]:
        return [self.step(r) for r in responses]


def layers(obs: Observation) -> list[str]:
    return [w.layer for w in obs.warnings]


X = [("search", {"q": "x"})]


# --- signatures ----------------------------------------------------------------------


def test_signature_ignores_key_order_and_json_string_arguments() -> None:
    a = call_signature("search", {"q": "x", "opts": {"b": 1, "a": [1, 2]}})
    assert a == call_signature("search", '{"opts": {"a": [1, 2], "b": 1}, "q": "x"}')
    assert a != call_signature("search", {"q": "y", "opts": {"b": 1, "a": [1, 2]}})
    assert a != call_signature("fetch", {"q": "x", "opts": {"b": 1, "a": [1, 2]}})


def test_arg_policies_ignore_keep_and_wildcard() -> None:
    cfg = LoopDetection(arg_policies={
        "log": ArgPolicy(ignore=("timestamp",)),
        "read": ArgPolicy(keep=("path",)),
        "*": ArgPolicy(ignore=("request_id",)),
    })
    assert call_signature("log", {"m": 1, "timestamp": 1}, cfg) == call_signature(
        "log", {"m": 1, "timestamp": 2}, cfg)
    assert call_signature("log", {"m": 1}, cfg) != call_signature("log", {"m": 2}, cfg)
    assert call_signature("read", {"path": "a", "limit": 1}, cfg) == call_signature(
        "read", {"path": "a", "limit": 500}, cfg)
    assert call_signature("other", {"q": 1, "request_id": "r1"}, cfg) == call_signature(
        "other", {"q": 1, "request_id": "r2"}, cfg)
    # without the policy the fields count
    assert call_signature("log", {"m": 1, "timestamp": 1}) != call_signature(
        "log", {"m": 1, "timestamp": 2})


def test_response_signature_is_a_multiset() -> None:
    a, b = call_signature("a", {}), call_signature("b", {})
    assert response_signature([a, b]) == response_signature([b, a])
    assert response_signature([a, a]) != response_signature([a])


def test_malformed_calls_are_signed_from_their_raw_text() -> None:
    ai = reply([("f", {"a": 1})], invalid=[("f", "{a: 1"), ("f", "{a: 1")])
    valid, bad1, bad2 = sign_calls(ai)
    assert bad1.malformed and bad1.sig == bad2.sig != valid.sig
    assert "invalid JSON" in bad1.label


def test_argument_policy_makes_calls_that_differ_only_in_ignored_fields_repeat() -> None:
    sim = Sim(LoopDetection(arg_policies={"log": ArgPolicy(ignore=("timestamp",))}))
    obs = sim.run([[("log", {"msg": "hi", "timestamp": t})] for t in range(3)])
    assert layers(obs[-1]) == ["repeat"]


# --- layer a: exact repeats ------------------------------------------------------------


def test_repeat_warns_at_warn_after_once_and_stops_at_stop_after() -> None:
    sim = Sim()
    obs = sim.run([X] * 5)
    assert [layers(o) for o in obs[:4]] == [[], [], ["repeat"], []]
    assert all(o.stop is None for o in obs[:4])
    text = obs[2].warnings[0].text
    assert 'search({"q":"x"})' in text and "3 times" in text and "Do not call it again" in text
    stop = obs[4].stop
    assert stop is not None
    assert (stop["layer"], stop["tool"], stop["args"], stop["count"], stop["threshold"]) == (
        "repeat", "search", '{"q":"x"}', 5, 5)
    assert stop["reason"] == "loop_detected" and "repeat layer" in stop["detail"]


def test_parallel_calls_in_another_order_count_as_the_same_response() -> None:
    a, b = ("search", {"q": "a"}), ("fetch", {"url": "u"})
    obs = Sim().run([[a, b], [b, a], [a, b]])
    assert layers(obs[2]) == ["repeat"]
    warning = obs[2].warnings[0]
    assert sorted(warning.calls) == ['fetch({"url":"u"})', 'search({"q":"a"})']
    assert len(obs[2].warnings) == 1  # one merged warning for the whole response


def test_a_repeated_call_batched_with_different_companions_still_counts() -> None:
    obs = Sim().run([[X[0], ("fetch", {"url": str(i)})] for i in range(3)])
    assert layers(obs[2]) == ["repeat"]
    assert obs[2].warnings[0].calls == ('search({"q":"x"})',)


@pytest.mark.parametrize("results", ["none", "same", "fresh"])
def test_twenty_distinct_calls_never_warn(results: str) -> None:
    obs = Sim(results=results).run([[("search", {"q": f"q{i}"})] for i in range(20)])
    assert all(not o.warnings and o.stop is None for o in obs)


def test_repeats_are_counted_within_the_window_only() -> None:
    sim = Sim(LoopDetection(window=6))
    responses = []
    for i in range(8):
        responses += [X] + [[("search", {"q": f"{i}-{j}"})] for j in range(3)]
    obs = sim.run(responses)  # X every 4th response: at most 2 in any 6
    assert all(not o.warnings and o.stop is None for o in obs)


def test_the_warning_is_given_again_after_the_signature_left_the_window() -> None:
    sim = Sim(LoopDetection(window=5))
    first = sim.run([X] * 3)
    sim.run([[("other", {"i": i})] for i in range(5)])
    again = sim.run([X] * 3)
    assert layers(first[2]) == ["repeat"] and layers(again[2]) == ["repeat"]


def test_repeated_malformed_calls_are_counted() -> None:
    sim = Sim()
    obs = [sim.step([], invalid=[("search", "{q: x")]) for _ in range(3)]
    assert layers(obs[2]) == ["repeat"]
    assert "invalid JSON" in obs[2].warnings[0].text


# --- layer b: cycles -------------------------------------------------------------------


def test_cycle_of_counts_started_rounds_of_periods_two_to_four() -> None:
    assert cycle_of(list("ABAB")) == (2, 2)
    assert cycle_of(list("ABABA")) == (2, 3)
    assert cycle_of(list("ABCABCA")) == (3, 3)
    assert cycle_of(list("ABACABAC")) == (4, 2)
    assert cycle_of(list("AAAAA")) == (0, 0)
    assert cycle_of(list("ABCDE")) == (0, 0)
    assert cycle_of(list("ABABABAB"))[0] == 2  # not reported as period 4


def test_a_ping_pong_is_named_as_a_cycle_before_repeat_counts_fire() -> None:
    a, b = [("web_search", {"q": "x"})], [("web_fetch", {"url": "u"})]
    obs = Sim(results="same").run([a, b, a, b, a, b, a, b, a])
    assert [layers(o) for o in obs[:5]] == [[], [], [], [], ["cycle"]]
    text = obs[4].warnings[0].text
    assert "going in circles" in text and 'web_search({"q":"x"}) → web_fetch' in text
    assert all(not o.warnings for o in obs[5:])  # one warning; members not warned again
    assert [(o.stop or {}).get("layer") for o in obs[5:]] == [None, None, "no_progress",
                                                              "cycle"]


def test_cycle_without_results_stops_at_stop_after_repetitions() -> None:
    a, b, c = [("a", {})], [("b", {})], [("c", {})]
    obs = Sim().run([a, b, c] * 4 + [a])
    assert layers(obs[6]) == ["cycle"]  # A B C A B C A: 3 rounds started
    stop = obs[12].stop
    assert stop is not None and stop["layer"] == "cycle" and stop["count"] == 5
    assert stop["calls"] == ["a({})", "b({})", "c({})"]  # the cycle, in the model's order


def test_cycle_of_parallel_responses_in_another_order() -> None:
    a, b, c = ("a", {}), ("b", {}), ("c", {})
    obs = Sim().run([[a, b], [c], [b, a], [c], [a, b]])
    assert layers(obs[4]) == ["cycle"]


def test_a_polling_cycle_that_makes_progress_is_not_stopped_early() -> None:
    sim = Sim()
    obs = []
    for _ in range(8):  # sleep always returns the same text; status advances
        obs.append(sim.step([("sleep", {"s": 10})], results="same"))
        obs.append(sim.step([("status", {"job": 1})], results="fresh"))
    assert all(not o.warnings and o.stop is None for o in obs)


# --- layer c: no progress --------------------------------------------------------------


def test_same_call_same_result_warns_and_stops_faster_than_plain_repeats() -> None:
    obs = Sim(results="same").run([X] * 4)
    assert layers(obs[2]) == ["no_progress"]
    assert "returned the same result the last 2 times" in obs[2].warnings[0].text
    stop = obs[3].stop
    assert stop is not None and (stop["layer"], stop["count"]) == ("no_progress", 3)
    assert Sim().run([X] * 4)[3].stop is None  # without result evidence: repeat thresholds


def test_polling_that_makes_progress_is_relaxed_but_still_bounded() -> None:
    obs = Sim(results="fresh").run([X] * 15)
    warned = [i + 1 for i, o in enumerate(obs) if o.warnings]
    assert warned == [9]  # 3 × warn_after
    assert "still changing" in obs[8].warnings[0].text
    assert all(o.stop is None for o in obs[:14])
    stop = obs[14].stop
    assert stop is not None and stop["layer"] == "repeat" and stop["count"] == 15
    assert stop["progressing"] is True


def test_progress_elsewhere_resets_a_calls_stagnation() -> None:
    sim = Sim()
    for _ in range(3):  # X stagnates but a new result arrives in between every time
        obs = sim.step([X[0], ("status", {})], results="fresh")
        assert not [w for w in obs.warnings if w.layer == "no_progress"]
    stuck = Sim(results="same")
    obs = [stuck.step([X[0], ("status", {})]) for _ in range(3)]
    assert layers(obs[2]) == ["no_progress"]


def test_stagnation_after_progress_warns_before_it_stops() -> None:
    sim = Sim()
    obs = [sim.step(X, results="fresh") for _ in range(6)]
    obs += [sim.step(X, results="same") for _ in range(4)]
    first_warning = next(i for i, o in enumerate(obs) if o.warnings)
    first_stop = next(i for i, o in enumerate(obs) if o.stop)
    assert first_warning < first_stop <= 9


# --- progress is judged per call: interleaved retries ------------------------------------

BOOK = ("book_reservation", {"flight": "HAT023", "paid": 1625})
FAILED: Result = ("Error: payment amount does not add up, total price is 4875, but paid 1625",
                  "error")
Between = Callable[[int], tuple[tuple[str, dict[str, Any]], Result]]


def think(i: int) -> tuple[tuple[str, dict[str, Any]], Result]:
    return ("think", {"thought": f"attempt {i}: the payment must add up"}), ("", "success")


def ack_think(i: int) -> tuple[tuple[str, dict[str, Any]], Result]:
    return ("think", {"thought": f"attempt {i}"}), ("Thought logged.", "success")


def lookup(i: int) -> tuple[tuple[str, dict[str, Any]], Result]:
    return ("get_flight_status", {"flight": f"HAT{i:03}"}), (f"HAT{i:03}: available", "success")


def retries(sim: Sim, between: Between, n: int = 7) -> list[Observation]:
    """``n`` identical failing calls, a new intervening call after each; the retries' results."""
    out = []
    for i in range(n):
        obs = sim.step([BOOK], returns=[FAILED])
        out.append(obs)
        if obs.stop is not None:
            break
        call, result = between(i)
        assert not sim.step([call], returns=[result]).warnings  # the intervening call is new
    return out


def outcome(obs: Sequence[Observation]) -> tuple[list[list[str]], tuple[str, int] | None]:
    stop = obs[-1].stop
    return [layers(o) for o in obs], None if stop is None else (stop["layer"], stop["count"])


def test_identical_failing_calls_with_a_fresh_think_between_them_warn_and_stop() -> None:
    """An empty ``think`` result changes nothing: the retries stagnate and are stopped."""
    warned, stop = outcome(retries(Sim(), think))
    assert warned == [[], [], ["no_progress"], []] and stop == ("no_progress", 3)


def test_a_read_only_lookup_between_retries_does_not_excuse_them() -> None:
    sim = Sim(LoopDetection(read_only_tools=("get_flight_status",)))
    warned, stop = outcome(retries(sim, lookup))
    assert warned == [[], [], ["no_progress"], []] and stop == ("no_progress", 3)


@pytest.mark.parametrize("between", [think, ack_think, lookup], ids=["think", "ack", "lookup"])
def test_the_same_error_again_is_never_progress(between: Between) -> None:
    """Whatever unmarked call comes between (an empty think, an acknowledging think, a lookup
    with new results), identical failing calls are warned about by the third and stopped by the
    fifth: their repeat thresholds stay strict."""
    obs = retries(Sim(), between)
    first_warning = next(i for i, o in enumerate(obs) if o.warnings)
    assert first_warning <= 2 and obs[-1].stop is not None and len(obs) <= 5
    assert obs[-1].stop["progressing"] is False


def test_a_successful_change_between_identical_calls_excuses_the_retry() -> None:
    """Checking a status again after an action that may have changed it is not stagnation."""
    sim = Sim()
    obs = []
    for i in range(4):
        obs.append(sim.step([("status", {"job": 1})], returns=[("job 1: failed", "success")]))
        sim.step([("restart", {"job": 1, "attempt": i})], returns=[(f"restart #{i} queued", "success")])
    assert all(not o.warnings and o.stop is None for o in obs[:3])


@pytest.mark.parametrize("read_only", [(), ("sleep", "status")])
def test_polling_stays_progress_when_the_poll_is_read_only(read_only: tuple[str, ...]) -> None:
    """A read-only call whose own result moves shows the world changed."""
    sim = Sim(LoopDetection(read_only_tools=read_only))
    obs = []
    for _ in range(8):
        obs.append(sim.step([("sleep", {"s": 10})], results="same"))
        obs.append(sim.step([("status", {"job": 1})], results="fresh"))
    assert all(not o.warnings and o.stop is None for o in obs)


def test_read_only_hints_in_tool_metadata() -> None:
    def named(name: str, metadata: dict[str, Any] | None) -> StructuredTool:
        return StructuredTool.from_function(lambda q: q, name=name, description="d",
                                            metadata=metadata)

    tools = [named("mcp_lookup", {"title": "Lookup", "readOnlyHint": True, "destructiveHint": False}),
             named("nested", {"annotations": {"readOnlyHint": True}}),
             named("writer", {"readOnlyHint": False}), named("plain", None),
             named("think", {"readOnlyHint": True})]
    cfg = LoopDetection(read_only_tools=("think",)).with_tool_hints(tools)
    assert cfg.read_only_tools == ("think", "mcp_lookup", "nested")
    plain = LoopDetection()
    assert plain.with_tool_hints([named("plain", None)]) is plain


# --- layer d: per-tool caps ------------------------------------------------------------


def test_per_tool_cap_warns_when_reached_and_stops_when_exceeded() -> None:
    sim = Sim(LoopDetection(per_tool={"fetch": 4}))
    obs = sim.run([[("fetch", {"url": str(i)})] for i in range(5)])
    assert [layers(o) for o in obs[:4]] == [[], [], [], ["per_tool"]]
    assert "fetch 4 times" in obs[3].warnings[0].text
    stop = obs[4].stop
    assert stop is not None and (stop["layer"], stop["tool"], stop["count"]) == ("per_tool", "fetch", 5)


def test_per_tool_cap_counts_parallel_calls_and_is_windowed() -> None:
    sim = Sim(LoopDetection(per_tool={"fetch": 4}, window=5))
    first = sim.step([("fetch", {"url": "a"}), ("fetch", {"url": "b"}), ("fetch", {"url": "c"})])
    assert first.stop is None and not first.warnings
    sim.run([[("other", {"i": i})] for i in range(5)])  # the fetches leave the window
    obs = sim.run([[("fetch", {"url": f"n{i}"})] for i in range(3)])
    assert all(o.stop is None and not o.warnings for o in obs)


# --- state ---------------------------------------------------------------------------


def test_detector_state_stays_small_and_bounded_by_the_window() -> None:
    sim = Sim(results="fresh")
    sizes = []
    for i in range(300):
        sim.step([("search", {"q": f"query number {i}"}), ("fetch", {"url": f"u{i % 7}"})])
        sizes.append(len(json.dumps(sim.det)))
    det = sim.det
    assert len(det["window"]) == 20
    assert len(det["calls"]) <= 40
    assert max(sizes[100:]) <= max(sizes[40:60]) + 200  # does not grow with the thread


def test_observe_does_not_mutate_the_given_state() -> None:
    sim = Sim(results="same")
    sim.run([X] * 2)
    before = json.dumps(sim.det, sort_keys=True)
    observe(sim.det, reply(X), sim.pending, sim.config)
    assert json.dumps(sim.det, sort_keys=True) == before


def test_a_text_reply_only_absorbs_the_results() -> None:
    sim = Sim(results="same")
    sim.run([X] * 2)
    obs = observe(sim.det, AIMessage("thinking"), sim.pending, sim.config)
    assert obs.stop is None and not obs.warnings
    assert obs.state["pending"] == {} and len(obs.state["window"]) == 2
    assert next(iter(obs.state["calls"].values())).get("streak") == 2


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="stop_after"):
        LoopDetection(warn_after=5, stop_after=5)
    with pytest.raises(ValueError, match="window"):
        LoopDetection(window=4)
    with pytest.raises(ValueError, match="per_tool"):
        LoopDetection(per_tool={"fetch": 0})
    with pytest.raises(ValueError):
        LoopDetection(progress_factor=0)
    with pytest.raises(ValueError, match="read_only_tools"):
        LoopDetection(read_only_tools=("think", "think"))
    with pytest.raises(ValueError, match="read_only_tools"):
        LoopDetection(read_only_tools=("",))
    with pytest.raises(ValueError):
        LoopDetection(read_only_tools="think")  # type: ignore[arg-type]
