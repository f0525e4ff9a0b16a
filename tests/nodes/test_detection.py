"""Loop detection layers as pure functions: signatures, repeats, cycles, per-call stagnation
(no progress) and its ladder (warn, block, stop), per-tool identity, thresholds and caps, the
same reply in a row, text loops, warning bookkeeping and the size of the detector state."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from langgraph_loop.core.config import (
    DEFAULT_LAYERS,
    LAYERS,
    ArgPolicy,
    Calls,
    LoopDetection,
    NoProgress,
    Repeat,
)
from langgraph_loop.engine.decision import block_answers
from langgraph_loop.engine.detection import (
    Observation,
    call_signature,
    cycle_of,
    observe,
    response_signature,
    sign_calls,
)

_IDS = itertools.count(1)
CallList = Sequence[tuple[str, dict[str, Any]]]
Result = tuple[str, str]  # a tool result's content and status


def reply(calls: CallList, invalid: Sequence[tuple[str, str]] = ()) -> AIMessage:
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

    def step(self, calls: CallList, *, results: str | None = None,
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
        blocked = block_answers(ai, obs.blocks)  # the graph answers blocked calls, never runs them
        self.pending = [*(m for m in self.pending if m.tool_call_id not in obs.blocks), *blocked]
        return obs

    def run(self, responses: Sequence[CallList]) -> list[Observation]:
        return [self.step(r) for r in responses]


def layers(obs: Observation) -> list[str]:
    return [w.layer for w in obs.warnings]


def rungs(obs: Sequence[Observation]) -> list[str]:
    """What each reply got: ``ok``, ``warn:<layer>``, ``block`` or ``stop:<layer>``."""
    out = []
    for o in obs:
        if o.stop is not None:
            out.append(f"stop:{o.stop['layer']}")
        elif o.blocks:
            out.append("block")
        else:
            out.append("warn:" + "+".join(layers(o)) if o.warnings else "ok")
    return out


CYCLES = LoopDetection(layers=LAYERS)  # the cycle layer is off by default
REPEATS = LoopDetection(layers=(*DEFAULT_LAYERS, "repeat"))  # so is the repeat layer (issue 37)


X = [("search", {"q": "x"})]


# --- signatures ----------------------------------------------------------------------


def test_signature_ignores_key_order_and_json_string_arguments() -> None:
    a = call_signature("search", {"q": "x", "opts": {"b": 1, "a": [1, 2]}})
    assert a == call_signature("search", '{"opts": {"a": [1, 2], "b": 1}, "q": "x"}')
    assert a != call_signature("search", {"q": "y", "opts": {"b": 1, "a": [1, 2]}})
    assert a != call_signature("fetch", {"q": "x", "opts": {"b": 1, "a": [1, 2]}})


def test_arg_policies_ignore_keep_and_wildcard() -> None:
    cfg = LoopDetection(calls=Calls(arg_policies={
        "log": ArgPolicy(ignore=("timestamp",)),
        "read": ArgPolicy(keep=("path",)),
        "*": ArgPolicy(ignore=("request_id",)),
    }))
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
    sim = Sim(LoopDetection(layers=REPEATS.layers,
                            calls=Calls(arg_policies={"log": ArgPolicy(ignore=("timestamp",))})))
    obs = sim.run([[("log", {"msg": "hi", "timestamp": t})] for t in range(3)])
    assert layers(obs[-1]) == ["repeat"]


# --- layer a: exact repeats ------------------------------------------------------------


def test_repeat_warns_at_warn_after_once_and_stops_at_stop_after() -> None:
    sim = Sim(REPEATS)
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
    obs = Sim(REPEATS).run([[a, b], [b, a], [a, b]])
    assert layers(obs[2]) == ["repeat"]
    warning = obs[2].warnings[0]
    assert sorted(warning.calls) == ['fetch({"url":"u"})', 'search({"q":"a"})']
    assert len(obs[2].warnings) == 1  # one merged warning for the whole response


def test_a_repeated_call_batched_with_different_companions_still_counts() -> None:
    obs = Sim(REPEATS).run([[X[0], ("fetch", {"url": str(i)})] for i in range(3)])
    assert layers(obs[2]) == ["repeat"]
    assert obs[2].warnings[0].calls == ('search({"q":"x"})',)


@pytest.mark.parametrize("results", ["none", "same", "fresh"])
def test_twenty_distinct_calls_never_warn(results: str) -> None:
    obs = Sim(results=results).run([[("search", {"q": f"q{i}"})] for i in range(20)])
    assert all(not o.warnings and o.stop is None for o in obs)


def test_repeats_are_counted_within_the_window_only() -> None:
    sim = Sim(LoopDetection(calls=Calls(window=6)))
    responses = []
    for i in range(8):
        responses += [X] + [[("search", {"q": f"{i}-{j}"})] for j in range(3)]
    obs = sim.run(responses)  # X every 4th response: at most 2 in any 6
    assert all(not o.warnings and o.stop is None for o in obs)


def test_the_warning_is_given_again_after_the_signature_left_the_window() -> None:
    sim = Sim(LoopDetection(layers=REPEATS.layers, calls=Calls(window=5)))
    first = sim.run([X] * 3)
    sim.run([[("other", {"i": i})] for i in range(5)])
    again = sim.run([X] * 3)
    assert layers(first[2]) == ["repeat"] and layers(again[2]) == ["repeat"]


def test_repeated_malformed_calls_are_counted() -> None:
    sim = Sim(REPEATS)
    obs = [sim.step([], invalid=[("search", "{q: x")]) for _ in range(3)]
    assert layers(obs[2]) == ["repeat"]
    assert "invalid JSON" in obs[2].warnings[0].text


# --- layer b: cycles (opt-in) ------------------------------------------------------------


def test_cycle_of_counts_started_rounds_of_periods_two_to_four() -> None:
    assert cycle_of(list("ABAB")) == (2, 2)
    assert cycle_of(list("ABABA")) == (2, 3)
    assert cycle_of(list("ABCABCA")) == (3, 3)
    assert cycle_of(list("ABACABAC")) == (4, 2)
    assert cycle_of(list("AAAAA")) == (0, 0)
    assert cycle_of(list("ABCDE")) == (0, 0)
    assert cycle_of(list("ABABABAB"))[0] == 2  # not reported as period 4


def test_the_cycle_layer_is_off_by_default() -> None:
    a, b, c = [("a", {})], [("b", {})], [("c", {})]
    assert "cycle" not in LoopDetection().layers
    obs = Sim(results="fresh").run([a, b, c] * 4)
    assert all(not o.warnings and o.stop is None for o in obs)
    cycled = Sim(CYCLES, results="fresh").run([a, b, c] * 8)
    assert [i for i, o in enumerate(cycled) if layers(o) == ["cycle"]] == [12]  # relaxed: 5 rounds


def test_a_ping_pong_of_identical_results_is_stopped_per_call_before_the_cycle_layer() -> None:
    a, b = [("web_search", {"q": "x"})], [("web_fetch", {"url": "u"})]
    obs = Sim(CYCLES, results="same").run([a, b, a, b, a, b, a])
    # nothing changes between the calls: the 4th request stops, no block first
    assert rungs(obs) == ["ok", "ok", "ok", "ok", "warn:no_progress+cycle", "warn:no_progress",
                          "stop:no_progress"]
    text = obs[4].warnings[1].text
    assert "going in circles" in text and 'web_search({"q":"x"}) → web_fetch' in text


def test_cycle_without_results_stops_at_stop_after_repetitions() -> None:
    a, b, c = [("a", {})], [("b", {})], [("c", {})]
    obs = Sim(CYCLES).run([a, b, c] * 4 + [a])
    assert layers(obs[6]) == ["cycle"]  # A B C A B C A: 3 rounds started
    stop = obs[12].stop
    assert stop is not None and stop["layer"] == "cycle" and stop["count"] == 5
    assert stop["calls"] == ["a({})", "b({})", "c({})"]  # the cycle, in the model's order


def test_cycle_of_parallel_responses_in_another_order() -> None:
    a, b, c = ("a", {}), ("b", {}), ("c", {})
    obs = Sim(CYCLES).run([[a, b], [c], [b, a], [c], [a, b]])
    assert layers(obs[4]) == ["cycle"]


# --- layer c: no progress, per call -------------------------------------------------------


def test_same_call_same_result_warns_and_stops_faster_than_plain_repeats() -> None:
    obs = Sim(results="same").run([X] * 4)
    assert layers(obs[2]) == ["no_progress"]
    assert "returned the same result twice in a row before you asked for it again" in obs[2].warnings[0].text
    stop = obs[3].stop
    assert stop is not None and (stop["layer"], stop["count"], stop["rung"]) == ("no_progress", 3,
                                                                                 "stop")
    assert stop["began"] == {"response": 1}  # the first of the identical results
    assert Sim().run([X] * 4)[3].stop is None  # without result evidence: repeat thresholds


def test_polling_that_makes_progress_is_relaxed_but_still_bounded() -> None:
    obs = Sim(LoopDetection(layers=("no_progress", "repeat")), results="fresh").run([X] * 15)
    warned = [i + 1 for i, o in enumerate(obs) if o.warnings]
    assert warned == [9]  # 3 × warn_after
    assert "still changing" in obs[8].warnings[0].text
    assert all(o.stop is None for o in obs[:14])
    stop = obs[14].stop
    assert stop is not None and stop["layer"] == "repeat" and stop["count"] == 15
    assert stop["progressing"] is True


def test_a_new_action_between_identical_results_refuses_the_repeat_rather_than_stop() -> None:
    """Issue 37: ``python test.py`` between edits, each a new call: the 4th identical output
    is refused (the run goes on: the edits may be work, as in solved runs that re-run a script
    between silent ``sed -i`` edits); when the edit in between is the same edit answered the
    same way, nothing new was done and the 4th request stops at once."""
    def rerun(edits: Callable[[int], dict[str, Any]]) -> list[Observation]:
        sim, obs = Sim(), []
        for i in range(4):
            obs.append(sim.step([("bash", {"command": "python test.py"})],
                                returns=[("1 failed in 0.3s", "success")]))
            if obs[-1].stop is not None:
                break
            args = edits(i)
            sim.step([("edit", args)], returns=[(f"edited line {args['line']}", "success")])
        return obs

    new = rerun(lambda i: {"line": i, "text": f"fix {i}"})
    assert rungs(new) == ["ok", "ok", "warn:no_progress", "block"]
    same = rerun(lambda i: {"line": 1, "text": "fix"})
    assert rungs(same) == ["ok", "ok", "warn:no_progress", "stop:no_progress"]
    assert same[3].stop is not None and "no other call's result changed" in same[3].stop["detail"]


def test_a_refused_call_runs_again_only_after_something_new_was_done() -> None:
    """After a refusal, the model did what it asked (a new edit) and re-runs: it runs; asked
    for again with nothing done since the refusal, the run stops."""
    sim, obs = Sim(), []
    for i in range(5):
        obs.append(sim.step([("bash", {"command": "python test.py"})],
                            returns=[("1 failed in 0.3s", "success")]))
        sim.step([("edit", {"line": i})], returns=[(f"edited line {i}", "success")])
    assert rungs(obs) == ["ok", "ok", "warn:no_progress", "block", "ok"]
    assert "Asking for this exact call again will stop the run" in next(iter(obs[3].blocks.values()))
    refused = obs[3].blocks
    again = sim.step([("bash", {"command": "python test.py"})], returns=[("1 failed in 0.3s", "success")])
    assert again.blocks and again.blocks.keys() != refused.keys()  # refused again (new call id)
    last = sim.step([("bash", {"command": "python test.py"})], returns=[("1 failed in 0.3s", "success")])
    assert last.stop is not None and "refused once" in last.stop["detail"]


def test_a_repeat_back_to_back_or_after_nothing_new_is_stopped_without_a_block() -> None:
    back_to_back = Sim(results="same").run([X] * 4)
    assert rungs(back_to_back)[2:] == ["warn:no_progress", "stop:no_progress"]
    obs = retries(Sim(), ack_think)  # a failing booking, between acknowledgements seen before
    assert rungs(obs)[2:] == ["warn:no_progress", "stop:no_progress"]


def test_the_ladder_per_layer() -> None:
    """``block=()`` stops at once; ``block_only_interleaved=False`` blocks back-to-back repeats."""
    assert rungs(Sim(LoopDetection(no_progress=NoProgress(block=False)),
                     results="same").run([X] * 4))[3] == "stop:no_progress"
    always = Sim(LoopDetection(no_progress=NoProgress(block_only_interleaved=False)),
                 results="same").run([X] * 5)
    assert rungs(always)[3:] == ["block", "stop:no_progress"]
    repeat = Sim(LoopDetection(layers=REPEATS.layers, no_progress=NoProgress(block=False),
                               repeat=Repeat(block=True))).run([X] * 6)
    assert rungs(repeat)[2:] == ["warn:repeat", "ok", "block", "stop:repeat"]


def test_a_result_that_changed_starts_the_count_again() -> None:
    sim = Sim()
    outputs = ["C", "C", "D", "C", "C", "E"]  # jackson-core-150's shape: one different in between
    obs = []
    for i, output in enumerate(outputs):  # five other calls between (the repeat window: 20)
        obs.append(sim.step(X, returns=[(output, "success")]))
        for j in range(5):
            sim.step([("other", {"i": i, "j": j})], returns=[(f"o{i}{j}", "success")])
    assert all(o.stop is None and not o.blocks for o in obs)
    assert layers(obs[2]) == ["no_progress"] and layers(obs[5]) == ["no_progress"]


def test_volatile_parts_of_results_do_not_make_them_different() -> None:
    sim = Sim()
    obs = [sim.step(X, returns=[(f"Ran 3 tests in 0.{i}s at 2025-11-19T00:0{i}:00 (pid {i})",
                                 "success")]) for i in range(4)]
    assert rungs(obs)[2:] == ["warn:no_progress", "stop:no_progress"]
    raw = Sim(LoopDetection(calls=Calls(normalize_results=False)))
    assert all(o.stop is None for o in [raw.step(X, returns=[(f"in 0.{i}s", "success")])
                                         for i in range(4)])


def test_mcp_content_blocks_with_fresh_ids_are_the_same_result() -> None:
    sim = Sim()
    obs = []
    for i in range(4):
        ai = reply(X)
        obs.append(observe(sim.det, ai, sim.pending, sim.config))
        sim.det = dict(obs[-1].state)
        sim.pending = [ToolMessage([{"type": "text", "text": "no rows", "id": f"lc_{i}"}],  # type: ignore[list-item]
                                   tool_call_id=ai.tool_calls[0]["id"])]
    assert rungs(obs)[2:] == ["warn:no_progress", "stop:no_progress"]


def test_a_write_naming_the_same_path_excuses_the_next_read() -> None:
    sim = Sim()
    read = ("bash", {"command": "cat src/app.py"})
    obs = []
    for i in range(4):
        obs.append(sim.step([read], returns=[("def f(): pass", "success")]))
        sim.step([("bash", {"command": f"sed -i 's/v{i}/v{i + 1}/' src/app.py"})],
                 returns=[("", "success")])
    assert all(not o.warnings and o.stop is None and not o.blocks for o in obs)
    folder = Sim()  # a rebuilt folder excuses a read of a file inside it
    for _ in range(4):
        o = folder.step([("bash", {"command": "cat build/text/index.txt"})],
                        returns=[("same", "success")])
        folder.step([("bash", {"command": "rm -rf build/text && make"})], returns=[("ok", "success")])
        assert o.stop is None and not o.blocks


def test_a_read_only_tool_naming_the_path_excuses_nothing() -> None:
    sim = Sim(LoopDetection(calls=Calls(read_only_tools=("grep",))))
    obs = []
    for _ in range(4):
        obs.append(sim.step([("bash", {"command": "cat src/app.py"})], returns=[("x", "success")]))
        sim.step([("grep", {"path": "src/app.py", "q": "def"})], returns=[("1 match", "success")])
    assert rungs(obs)[2:] == ["warn:no_progress", "stop:no_progress"]


def test_a_result_without_content_counts_from_four() -> None:
    """A silent ``sed -i`` says little about the state: the no-progress rungs wait for 4."""
    sim = Sim()
    obs = [sim.step(X, returns=[("<returncode>0</returncode>\n<output>\n</output>", "success")])
           for _ in range(5)]
    assert rungs(obs) == ["ok", "ok", "ok", "ok", "stop:no_progress"]
    assert obs[4].stop is not None and obs[4].stop["count"] == 4


def test_the_same_reply_eight_times_in_a_row_stops_whatever_the_results() -> None:
    """A runaway (an insertion applied again and again, its file growing each time): the same
    calls 8 times back to back stop, whatever they return (issue 37: 15 before)."""
    obs = Sim(results="fresh").run([X] * 8)
    assert rungs(obs) == ["ok"] * 7 + ["stop:same_reply"]
    assert obs[7].stop is not None and obs[7].stop["began"] == {"response": 1}
    interleaved = Sim(results="fresh").run([X, [("status", {})]] * 8)  # not in a row: left running
    assert all(o.stop is None for o in interleaved)


def test_a_tool_declares_what_makes_two_calls_the_same_and_its_thresholds() -> None:
    def named(name: str, metadata: dict[str, Any] | None) -> StructuredTool:
        return StructuredTool.from_function(lambda q: q, name=name, description="d",
                                            metadata=metadata)

    tools = [named("read", {"loop_key": ["path"], "loop_stop_after": 5}),
             named("ask", {"loop_key": lambda args: args["q"].lower()}),
             named("plain", None)]
    cfg = LoopDetection().with_tool_hints(tools)
    assert call_signature("read", {"path": "a", "offset": 1}, cfg) == call_signature(
        "read", {"path": "a", "offset": 9}, cfg)
    assert call_signature("ask", {"q": "Hi"}, cfg) == call_signature("ask", {"q": "HI"}, cfg)
    sim = Sim(cfg)
    obs = [sim.step([("read", {"path": "a", "offset": i})], returns=[("same", "success")])
           for i in range(6)]
    assert rungs(obs) == ["ok", "ok", "warn:no_progress", "ok", "ok", "stop:no_progress"]
    explicit = LoopDetection(calls=Calls(arg_policies={"read": ArgPolicy()})).with_tool_hints(tools)
    assert explicit.calls.arg_policies["read"] == ArgPolicy()  # explicit settings win


def test_a_poll_with_a_constant_sleep_needs_the_sleep_tools_own_thresholds() -> None:
    """``sleep`` returns the same text every time: per call it stagnates; a tool whose result
    never says anything declares its own thresholds."""
    def poll(sim: Sim) -> list[Observation]:
        out = []
        for _ in range(8):
            out.append(sim.step([("sleep", {"s": 10})], results="same"))
            out.append(sim.step([("status", {"job": 1})], results="fresh"))
        return out

    assert "block" in rungs(poll(Sim()))  # the status moves: the sleep is refused, not stopped
    relaxed = LoopDetection(calls=Calls(arg_policies={"sleep": ArgPolicy(warn_after=50, stop_after=60)}))
    assert all(not o.warnings and o.stop is None and not o.blocks for o in poll(Sim(relaxed)))


def test_read_only_hints_in_tool_metadata() -> None:
    def named(name: str, metadata: dict[str, Any] | None) -> StructuredTool:
        return StructuredTool.from_function(lambda q: q, name=name, description="d",
                                            metadata=metadata)

    tools = [named("mcp_lookup", {"title": "Lookup", "readOnlyHint": True, "destructiveHint": False}),
             named("nested", {"annotations": {"readOnlyHint": True}}),
             named("writer", {"readOnlyHint": False}), named("plain", None),
             named("think", {"readOnlyHint": True})]
    cfg = LoopDetection(calls=Calls(read_only_tools=("think",))).with_tool_hints(tools)
    assert cfg.calls.read_only_tools == ("think", "mcp_lookup", "nested")
    plain = LoopDetection()
    assert plain.with_tool_hints([named("plain", None)]) is plain


# --- interleaved retries (tau-bench's failing booking) -------------------------------------

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


@pytest.mark.parametrize(("between", "rungs_without_hints"), [
    (think, ["ok", "ok", "warn:no_progress", "block", "ok", "block", "ok"]),
    (ack_think, ["ok", "ok", "warn:no_progress", "stop:no_progress"]),
    (lookup, ["ok", "ok", "warn:no_progress", "block", "ok", "block", "ok"])], ids=["think", "ack", "lookup"])
def test_identical_failing_calls_between_new_calls(between: Between, rungs_without_hints: list[str]) -> None:
    """A booking failing the same way again: between a call new to the run that ran silently
    or returned something new, the retry is refused (and runs again after the next new call);
    between acknowledgements seen before, it stops. Marked read-only, the calls between change
    nothing: the retry stops."""
    obs = retries(Sim(), between)
    assert rungs(obs) == rungs_without_hints
    hinted = retries(Sim(LoopDetection(calls=Calls(read_only_tools=("think", "get_flight_status")))), between)
    assert rungs(hinted) == ["ok", "ok", "warn:no_progress", "stop:no_progress"]
    assert hinted[-1].stop is not None and hinted[-1].stop["progressing"] is False


# --- layer d: per-tool caps ------------------------------------------------------------


def test_per_tool_cap_warns_when_reached_and_stops_when_exceeded() -> None:
    sim = Sim(LoopDetection(calls=Calls(per_tool={"fetch": 4})))
    obs = sim.run([[("fetch", {"url": str(i)})] for i in range(5)])
    assert [layers(o) for o in obs[:4]] == [[], [], [], ["per_tool"]]
    assert "fetch 4 times" in obs[3].warnings[0].text
    stop = obs[4].stop
    assert stop is not None and (stop["layer"], stop["tool"], stop["count"]) == ("per_tool", "fetch", 5)


def test_per_tool_cap_with_a_block_rung() -> None:
    sim = Sim(LoopDetection(no_progress=NoProgress(block=False), calls=Calls(per_tool={"fetch": 2},
                                                                             block_per_tool=True)))
    obs = sim.run([[("fetch", {"url": str(i)})] for i in range(4)])
    assert rungs(obs) == ["ok", "warn:per_tool", "block", "stop:per_tool"]
    assert "over its limit of 2" in next(iter(obs[2].blocks.values()))


def test_per_tool_cap_counts_parallel_calls_and_is_windowed() -> None:
    sim = Sim(LoopDetection(calls=Calls(per_tool={"fetch": 4}, window=5)))
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
        sizes.append(len(json.dumps(sim.det, default=repr)))  # a result: its repr, clipped
    det = sim.det
    assert len(det["window"]) == 20
    assert len(det["calls"]) <= 40
    assert max(sizes[100:]) <= max(sizes[40:60]) + 200  # does not grow with the thread


def test_observe_does_not_mutate_the_given_state() -> None:
    sim = Sim(results="same")
    sim.run([X] * 2)
    before = json.dumps(sim.det, sort_keys=True, default=repr)
    observe(sim.det, reply(X), sim.pending, sim.config)
    assert json.dumps(sim.det, sort_keys=True, default=repr) == before


def test_a_text_reply_only_absorbs_the_results() -> None:
    sim = Sim(results="same")
    sim.run([X] * 2)
    obs = observe(sim.det, AIMessage("thinking"), sim.pending, sim.config)
    assert obs.stop is None and not obs.warnings
    assert obs.state["pending"] == {} and len(obs.state["window"]) == 2
    assert next(iter(obs.state["calls"].values())).get("same") == 2


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="stop_after"):
        LoopDetection(repeat=Repeat(warn_after=5, stop_after=5))
    with pytest.raises(ValueError, match="window"):
        LoopDetection(calls=Calls(window=4))
    with pytest.raises(ValueError, match="per_tool"):
        LoopDetection(calls=Calls(per_tool={"fetch": 0}))
    with pytest.raises(ValueError):
        LoopDetection(repeat=Repeat(progress_factor=0))
    with pytest.raises(ValueError, match="read_only_tools"):
        LoopDetection(calls=Calls(read_only_tools=("think", "think")))
    with pytest.raises(ValueError, match="read_only_tools"):
        LoopDetection(calls=Calls(read_only_tools=("",)))
    with pytest.raises(ValueError):
        LoopDetection(calls=Calls(read_only_tools="think"))  # type: ignore[arg-type]


def test_a_reply_cut_while_streaming_warns_once_then_stops() -> None:
    """The cut reply's own text loops, but it gets the cut notice, not the finished-reply
    warning; the run's second cut stops it (layer ``text``)."""
    cut = AIMessage("I will fix the typo now. " * 16,
                    response_metadata={"langgraph_loop_cut": "text"})
    sim = Sim(results="same")
    sim.run([X])
    first = observe(sim.det, cut, sim.pending, sim.config)
    assert first.stop is None and [(w.layer, w.key) for w in first.warnings] == [("text", "text_cut")]
    assert "was cut off because it kept repeating" in first.warnings[0].text
    assert first.state["cuts"] == 1 and first.state["pending"] == {}
    second = observe(first.state, cut, [], sim.config)
    assert second.stop is not None and not second.warnings
    assert (second.stop["reason"], second.stop["layer"], second.stop["count"]) == (
        "loop_detected", "text", 2)
    finished = observe({}, AIMessage(str(cut.content)), [], sim.config)
    assert [(w.layer, w.key) for w in finished.warnings] == [("text", "text")]


def test_a_call_is_remembered_while_in_the_window_or_recent_and_no_longer() -> None:
    """The definition ``push`` keeps: a call's record stays while a response of the window
    holds it or it was requested within the last ``call_window`` calls; the records are in the
    order of their latest request. Random replies of 1-3 calls over a small pool."""
    rng = random.Random(11)
    config = LoopDetection(layers=("no_progress",), no_progress=NoProgress(call_window=7),
                           calls=Calls(window=5))
    for _ in range(40):
        det: dict[str, Any] = {}
        latest: dict[str, int] = {}
        windows: list[set[str]] = []
        count = 0
        for _ in range(30):
            calls = [("t", {"k": rng.randrange(8)}) for _ in range(rng.randint(1, 3))]
            ai = reply(calls)
            det = observe(det, ai, [], config).state
            sigs = [call_signature(n, a, config) for n, a in calls]
            for sig in sigs:
                count += 1
                latest[sig] = count
            windows = [*windows, set(sigs)][-config.calls.window:]
            expected = {s for s, last in latest.items()
                        if any(s in w for w in windows) or last > count - config.no_progress.call_window}
            assert set(det["calls"]) == expected
            lasts = [r["last"] for r in det["calls"].values()]
            assert lasts == sorted(lasts)
            latest = {s: n for s, n in latest.items() if s in expected}
