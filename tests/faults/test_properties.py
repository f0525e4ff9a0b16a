"""The property suite extended to faults and bad input (issue 21, item 8).

Each example builds a loop agent from a random configuration and drives two user turns of
a thread (a *run* each, with all its resumes) with:

- random input histories, valid and invalid (an unanswered call in the middle, an orphan
  ToolMessage, a system message in the middle, an unknown role, a call answered twice);
- random model replies: text, parallel calls whose ids are fresh, shared or missing,
  malformed calls, arguments holding a lone surrogate, a provider failure;
- random tool behaviours: return, raise, hang past a deadline (``TimeoutError``), return
  odd shapes (None, dict, int, block lists and strings over the cap, a lone surrogate,
  their own ToolMessage), mutate their nested args, return ``Command``s (a valid one, one
  answering another call, one resetting ``usage``, one writing the loop's stop keys, one
  without a message), call an unknown tool;
- random per-run overrides (``dict``, read-only mapping, invalid values, a string, a list of
  pairs) and interrupts (approval of a gated tool with random decisions, ``interrupt()``
  inside a tool), every resume sent *without* ``context``, as a UI or a server sends it.

Checked, for every example (``violations``):

- every request the model received is provider-valid;
- a run either is refused up front (``ValueError``: no model call, thread unchanged, no new
  checkpoint) or ends with a stop reason; no other exception escapes (a provider failure
  leaves it resumable and is resumed); a non-mapping or invalid ``context`` is refused;
- caps held per run, counted outside the loop: tool executions <= ``max_tool_calls``,
  model calls with tools <= ``max_model_calls`` and at most one tools-free final call,
  tokens billed <= ``token_budget``, and ``usage`` equals what was billed;
- every tool output that reached the model is within ``max_tool_output_chars`` (+ note);
- no tool call ran twice (by call id), and no call the model made was changed by a tool
  (beyond the documented repair of its text: a lone surrogate escaped, ``encodable_text``);
- the stored thread is provider-valid when each run ends.

The tool-call class (shared or missing call ids, a tool answering another call, args
mutated, block output past the cap, a ``Command`` writing loop-owned keys) is generated
while ``TOOL_CALL_CLASS_FIXED`` is on (it is: the tools node's rebuild on ``ToolNode``
fixed it).

Budget: the hypothesis profile's ``max_examples`` examples of two runs each (``ci``: 300
examples, 600 runs; ``HYPOTHESIS_PROFILE=dev``: 100 examples, 200 runs).
"""

from __future__ import annotations

import copy
import itertools
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from langgraph_loop import Approval, Iterations, Limits, LoopDetection, Repeat, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import as_stored, check_pairing, priced, stored, text_of

NOTE_ROOM = 200  # the truncation note after a capped output
MAX_RESUMES = 25
OVERRIDDEN = ("max_tool_calls", "max_model_calls", "token_budget", "max_tool_output_chars")


class ModelDown(RuntimeError):
    """A scripted provider failure (not retried: a ``RuntimeError``)."""


# --- the world: what happened, counted outside the loop ---------------------------------


@dataclass
class World:
    """Everything an example's invariants are checked against."""

    run: int = 0
    executions: list[tuple[int, str]] = field(default_factory=list)  # (run, call id)
    replies: list[tuple[int, bool, int]] = field(default_factory=list)  # (run, tools?, billed)
    said: dict[str, Any] = field(default_factory=dict)  # call id -> args as the model made them
    violations: list[str] = field(default_factory=list)

    def executed(self, call_id: str) -> None:
        self.executions.append((self.run, call_id))

    def fail(self, text: str) -> None:
        self.violations.append(f"run {self.run}: {text}")


# --- tools ------------------------------------------------------------------------------

ODD_SHAPES: list[Any] = [None, {"k": [1, 2]}, 42, [{"type": "text", "text": "x" * 5000}], "",
                         "report\udcff.txt", "y" * 5000, "own-message", []]
COMMAND_KINDS = 6


def make_tools(world: World) -> list[BaseTool]:
    """The example's tools; each records its execution by call id."""

    @tool
    def add(a: int, b: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> int:
        """Add two integers."""
        world.executed(tool_call_id)
        return a + b

    @tool
    def boom(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Always fails."""
        world.executed(tool_call_id)
        raise RuntimeError("kaput")

    @tool
    def slow(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Hangs until its own deadline."""
        world.executed(tool_call_id)
        time.sleep(0.01)
        raise TimeoutError("no answer within 10 ms")

    @tool
    def odd(shape: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Any:
        """Returns an odd shape."""
        world.executed(tool_call_id)
        value = ODD_SHAPES[shape % len(ODD_SHAPES)]
        if value == "own-message":
            return ToolMessage("my own answer", tool_call_id=tool_call_id)
        return copy.deepcopy(value)

    @tool
    def mutate(doc: dict[str, Any], tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Changes the argument it was given."""
        world.executed(tool_call_id)
        doc.setdefault("tags", []).append("seen")
        doc["changed"] = True
        return "mutated"

    @tool
    def command(kind: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Any:
        """Returns a Command."""
        world.executed(tool_call_id)
        answer = [ToolMessage("command done", tool_call_id=tool_call_id)]
        kind %= COMMAND_KINDS
        if kind == 0:
            return Command(update={"messages": answer, "mode": "edited"})
        if kind == 1:
            return Command(update={"messages": [ToolMessage("x", tool_call_id="someone-else")]})
        if kind == 2:
            zero = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
            return Command(update={"messages": answer, "usage": zero})
        if kind == 3:
            return Command(update={"messages": answer, "stop_reason": None, "iteration": 0})
        if kind == 4:
            return Command(update={"mode": "no message"})
        return Command(update={"messages": answer,
                               "todos": [{"content": "t", "status": "pending"}]})

    @tool
    def own(tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Answers with a ToolMessage addressed to another call."""
        world.executed(tool_call_id)
        return ToolMessage("not yours", tool_call_id="wrong-id")

    @tool
    def echo(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Echoes its text."""
        world.executed(tool_call_id)
        return text

    @tool
    def danger(target: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Destroys a target (gated when approval is on)."""
        world.executed(tool_call_id)
        return f"destroyed {target}"

    @tool
    def ask(q: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Asks the user (pauses the run)."""
        answer = interrupt({"question": q})
        world.executed(tool_call_id)  # once it has its answer: a resume re-enters the tool
        return f"user said {answer}"

    return [add, boom, slow, odd, mutate, command, own, echo, danger, ask]


# --- model replies ----------------------------------------------------------------------

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "add": ("add", {"a": 1, "b": 2}),
    "boom": ("boom", {}),
    "slow": ("slow", {}),
    "mutate": ("mutate", {"doc": {"tags": ["draft"], "meta": {"n": [1]}}}),
    "own": ("own", {}),
    "echo": ("echo", {"text": "plain"}),
    "echo_surrogate": ("echo", {"text": "caf\udce9"}),
    "danger": ("danger", {"target": "prod"}),
    "ask": ("ask", {"q": "sure?"}),
    "unknown": ("nope", {"x": 1}),
    **{f"odd{i}": ("odd", {"shape": i}) for i in range(len(ODD_SHAPES))},
    **{f"command{i}": ("command", {"kind": i}) for i in range(COMMAND_KINDS)},
}

TOOL_CALL_CLASS_FIXED = True
"""Generate the tool-call class too (see the module docstring)."""
TOOL_CALL_FAULTS = frozenset({"own", "mutate", "odd3", "command1", "command2", "command3"})
"""Tool behaviours of the tool-call class: answering another call (``own``, ``command1``),
mutating args, a block list past the cap (``odd3``), a ``Command`` resetting ``usage`` or
writing the stop keys."""
ID_MODES = ["fresh", "fresh", "fresh", *(["shared", "missing"] if TOOL_CALL_CLASS_FIXED else [])]
GENERATED = sorted(k for k in CALLS if TOOL_CALL_CLASS_FIXED or k not in TOOL_CALL_FAULTS)

reply_specs = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(["done", "", "All good."])),
    st.tuples(st.just("calls"), st.lists(st.sampled_from(GENERATED), min_size=1,
                                          max_size=4).map(tuple),
              st.sampled_from(ID_MODES), st.booleans()),
    st.tuples(st.just("raise")),
)


def reply_item(spec: tuple[Any, ...], world: World, model: list[ScriptedChatModel],
               ids: Any) -> Any:
    """A script item: records each answered call (run, tools bound?, tokens billed)."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if spec[0] == "raise":
            raise ModelDown("provider unavailable (scripted)")
        if spec[0] == "text":
            return AIMessage(spec[1])
        keys, id_mode, malformed = spec[1], spec[2], spec[3]
        shared = f"p{next(ids)}"
        calls = []
        for n, key in enumerate(keys):
            name, args = CALLS[key]
            call_id: Any = shared if id_mode == "shared" else f"p{next(ids)}"
            if id_mode == "missing" and n == 0:
                call_id = None
            calls.append({"name": name, "args": copy.deepcopy(args), "id": call_id,
                          "type": "tool_call"})
            if id_mode == "fresh":
                world.said[call_id] = as_stored(copy.deepcopy(args))
        invalid = [{"name": "add", "args": '{"a": 1,', "id": f"p{next(ids)}",
                    "error": "Unterminated JSON", "type": "invalid_tool_call"}] if malformed else []
        return AIMessage("", tool_calls=calls, invalid_tool_calls=invalid)

    billed = priced(answer)

    def item(messages: list[BaseMessage]) -> AIMessage:
        reply = billed(messages)  # raises ModelDown before anything is recorded
        tools_bound = bool(model[0].request_tools[-1])
        usage = reply.usage_metadata
        world.replies.append((world.run, tools_bound, usage["total_tokens"] if usage else 0))
        return reply

    return item


# --- input histories ---------------------------------------------------------------------

SEGMENTS = ["qa", "round", "dangling", "orphan", "system", "unknown_role", "answered_twice"]
INVALID = {"dangling", "orphan", "system", "unknown_role", "answered_twice"}


def history(segments: list[str], ids: Any) -> list[Any]:
    """Messages for the segments (a leading ``system`` segment is valid)."""
    out: list[Any] = []
    for kind in segments:
        call = f"h{next(ids)}"
        ask = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 2}, "id": call,
                                         "type": "tool_call"}])
        if kind == "qa":
            out += [HumanMessage("earlier question"), AIMessage("earlier answer")]
        elif kind == "round":
            out += [HumanMessage("2+2?"), ask, ToolMessage("4", tool_call_id=call),
                    AIMessage("4")]
        elif kind == "dangling":
            out += [HumanMessage("2+2?"), ask]
        elif kind == "orphan":
            out += [ToolMessage("stray", tool_call_id=f"ghost{call}")]
        elif kind == "system":
            out += [SystemMessage("Be brief.")]
        elif kind == "unknown_role":
            out += [{"role": "wizard", "content": "abracadabra"}]
        else:
            out += [HumanMessage("2+2?"), ask, ToolMessage("4", tool_call_id=call),
                    ToolMessage("4 again", tool_call_id=call), AIMessage("4")]
    return out


# --- overrides --------------------------------------------------------------------------

valid_overrides = st.fixed_dictionaries({}, optional={
    "max_tool_calls": st.integers(1, 5),
    "max_model_calls": st.integers(1, 6),
    "token_budget": st.integers(300, 4000),
    "max_tool_output_chars": st.integers(100, 2000),
})

def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """Overrides nested by group (``max_model_calls`` is per iteration, the rest per run)."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        out.setdefault("iterations" if name == "max_model_calls" else "limits", {})[name] = value
    return out


contexts = st.one_of(
    st.none(),
    st.tuples(st.just("dict"), valid_overrides.map(nest)),
    st.tuples(st.just("proxy"), valid_overrides.map(nest)),
    st.tuples(st.just("invalid"), st.sampled_from([{"limits": {"max_tool_calls": 0}},
                                                   {"limits": {"max_tool_calls": "2"}},
                                                   {"limits": {"token_budget": True}},
                                                   {"limits": {"max_itterations": 3}},
                                                   {"max_itterations": 3}])),
    st.tuples(st.just("string"), st.just("max_tool_calls=2")),
    st.tuples(st.just("pairs"), valid_overrides.map(lambda d: list(nest(d).items()))),
)


def context_value(spec: Any) -> Any:
    if spec is None:
        return None
    kind, value = spec
    return MappingProxyType(value) if kind == "proxy" else value


def must_refuse(spec: Any) -> bool:
    """Contexts a run must refuse: invalid values and anything that is not a mapping."""
    return spec is not None and spec[0] in ("invalid", "string", "pairs")


# --- configurations -----------------------------------------------------------------------

configs = st.fixed_dictionaries({
    "max_tool_calls": st.one_of(st.none(), st.integers(1, 6)),
    "max_model_calls": st.integers(1, 8),
    "token_budget": st.one_of(st.none(), st.integers(300, 4000)),
    "max_tool_output_chars": st.sampled_from([100, 1000, None]),
    "final_answer": st.booleans(),
    "approval": st.booleans(),
    "detection": st.booleans(),
})


@dataclass
class Caps:
    max_tool_calls: int | None
    max_model_calls: int | None
    token_budget: int | None
    max_tool_output_chars: int | None


def caps_for(c: dict[str, Any], context: Any) -> Caps:
    given = {name: value for group in (context.values() if isinstance(context, Mapping) else ())
             for name, value in group.items()}
    return Caps(**{name: given.get(name, c[name]) for name in OVERRIDDEN})


# --- the driver -------------------------------------------------------------------------


def _answer_interrupts(state: Any, rnd: random.Random) -> Command:
    resume: dict[str, Any] = {}
    for pending in state.interrupts:
        value = pending.value
        if isinstance(value, dict) and "action_requests" in value:
            decisions = [rnd.choice([{"type": "approve"},
                                     {"type": "reject", "message": "not now"},
                                     {"type": "edit", "edited_action": {
                                         "name": "danger", "args": {"target": "staging"}}}])
                         for _ in value["action_requests"]]
            resume[pending.id] = {"decisions": decisions}
        else:
            resume[pending.id] = "yes"
    return Command(resume=resume)


def _stored(agent: Any, config: Any) -> Any:
    """``stored``, or the error that reading the thread raised (a thread nobody can read)."""
    try:
        return stored(agent, config)
    except Exception as exc:  # noqa: BLE001 - reported by the caller
        return f"unreadable: {exc!r}"


def drive(agent: Any, model: ScriptedChatModel, world: World, value: Any, context: Any,
          rnd: random.Random) -> dict[str, Any] | None:
    """One run with all its resumes (never with ``context``); None when refused up front."""
    config: Any = {"configurable": {"thread_id": "fuzz"}}
    before, calls = _stored(agent, config), model.calls
    kwargs = {} if context is None else {"context": context}
    pending: Any = value
    for attempt in range(MAX_RESUMES):
        try:
            agent.invoke(pending, config, **kwargs)
        except ValueError as exc:
            if attempt == 0 and model.calls == calls and _stored(agent, config) == before:
                return None  # refused up front: nothing written
            world.fail(f"{type(exc).__name__} after the run wrote or called something: {exc}"[:300])
            return {}
        except ModelDown:
            pass  # the thread stays resumable
        except Exception as exc:  # noqa: BLE001 - any other escape is a violation
            world.fail(f"{type(exc).__name__}: {exc}"[:300])
            return {}
        kwargs = {}  # a resume carries no context
        try:
            state = agent.get_state(config)
        except Exception as exc:  # noqa: BLE001 - a thread nobody can read
            world.fail(f"get_state raised {type(exc).__name__}: {exc}"[:300])
            return {}
        if state.interrupts:
            pending = _answer_interrupts(state, rnd)
        elif state.next:
            pending = None
        else:
            return dict(state.values)
    world.fail(f"the run did not end after {MAX_RESUMES} resumes")
    return {}


def check_run(world: World, values: dict[str, Any], caps: Caps) -> None:
    """The caps of the run just finished, counted outside the loop."""
    run = world.run
    if values.get("stop_reason") is None:
        world.fail(f"ended without a stop reason: {values.get('stop_reason')!r}")
    ran = [i for r, i in world.executions if r == run]
    if caps.max_tool_calls is not None and len(ran) > caps.max_tool_calls:
        world.fail(f"{len(ran)} tool executions under max_tool_calls={caps.max_tool_calls}")
    mine = [(tools, billed) for r, tools, billed in world.replies if r == run]
    with_tools = sum(tools for tools, _ in mine)
    if caps.max_model_calls is not None and with_tools > caps.max_model_calls:
        world.fail(f"{with_tools} model calls under max_model_calls={caps.max_model_calls}")
    if len(mine) - with_tools > 1:
        world.fail(f"{len(mine) - with_tools} tools-free calls in one run")
    billed = sum(b for _, b in mine)
    if caps.token_budget is not None and billed > caps.token_budget:
        world.fail(f"billed {billed} tokens under token_budget={caps.token_budget}")
    usage = (values.get("usage") or {}).get("total_tokens")
    if usage != billed:
        world.fail(f"usage says {usage} tokens, {billed} were billed")
    problems = check_pairing(values.get("messages") or [])
    if problems:
        world.fail(f"stored thread not provider-valid: {problems}")


def check_example(world: World, model: ScriptedChatModel, output_cap: int | None) -> None:
    """Invariants over the whole example."""
    for i, request in enumerate(model.requests):
        problems = check_pairing(request)
        if problems:
            world.violations.append(f"request {i} not provider-valid: {problems}")
        for m in request:
            if isinstance(m, AIMessage):  # ids shared in a message are reported as invalid
                ids = [c["id"] for c in m.tool_calls]
                for call in m.tool_calls:
                    said = world.said.get(str(call["id"]))
                    if ids.count(call["id"]) == 1 and said is not None and said != call["args"]:
                        world.violations.append(f"call {call['id']} changed: {said} -> "
                                                f"{call['args']}")
            size = len(text_of(m.content)) if isinstance(m, ToolMessage) else 0
            if output_cap is not None and size > output_cap + NOTE_ROOM:
                world.violations.append(f"request {i}: {size} characters of tool output "
                                        f"under max_tool_output_chars={output_cap}")
    seen: set[str] = set()
    for _, call_id in world.executions:
        if call_id in seen:
            world.violations.append(f"tool call {call_id} ran twice")
        seen.add(call_id)


def run_example(c: dict[str, Any], segments: list[str], script: list[tuple[Any, ...]],
                turns: list[Any], seed: int) -> list[str]:
    """Drive one example; returns the violations found (empty: all invariants held)."""
    world, rnd, ids = World(), random.Random(seed), itertools.count()
    holder: list[ScriptedChatModel] = []
    model = ScriptedChatModel(script=[reply_item(s, world, holder, ids) for s in script],
                              default=reply_item(("text", "final answer"), world, holder, ids))
    holder.append(model)
    agent = create_loop_agent(
        model, make_tools(world), checkpointer=InMemorySaver(),
        iterations=Iterations(max_model_calls=c["max_model_calls"]),
        limits=Limits(max_tool_calls=c["max_tool_calls"], token_budget=c["token_budget"],
                      final_answer=c["final_answer"], max_tool_output_chars=c["max_tool_output_chars"]),
        approval=Approval(tools=("danger",)) if c["approval"] else None,
        loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)) if c["detection"] else None,
    )
    output_caps: list[int | None] = []
    for n, spec in enumerate(turns):
        world.run += 1
        first = history(segments, ids) if n == 0 else []
        context = context_value(spec)
        values = drive(agent, model, world, {"messages": [*first, HumanMessage("Work on it.")]},
                       context, rnd)
        if values is None:  # refused: it must have been refusable; then a plain run
            if not (must_refuse(spec) or (n == 0 and set(segments) & INVALID)):
                world.fail(f"a valid input was refused (context {spec!r})")
            context = None
            values = drive(agent, model, world, {"messages": [HumanMessage("Work on it.")]},
                           None, rnd)
        elif values and must_refuse(spec):  # ({}: a violation was recorded already)
            world.fail(f"context {spec!r} was not refused")
        if values:
            caps = caps_for(c, context)
            output_caps.append(caps.max_tool_output_chars)
            check_run(world, values, caps)
    biggest = None if None in output_caps or not output_caps else max(output_caps)  # type: ignore[type-var]
    check_example(world, model, biggest)
    return world.violations


FAULTS = settings(deadline=None, max_examples=settings().max_examples,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FAULTS
@given(c=configs, segments=st.lists(st.sampled_from(SEGMENTS), max_size=4),
       script=st.lists(reply_specs, max_size=6), turns=st.lists(contexts, min_size=2, max_size=2),
       seed=st.integers(0, 2**32 - 1))
def test_faults_never_reach_the_provider_and_caps_hold(
        c: dict[str, Any], segments: list[str], script: list[tuple[Any, ...]],
        turns: list[Any], seed: int) -> None:
    violations = run_example(c, segments, script, turns, seed)
    assert not violations, "\n".join(violations)
