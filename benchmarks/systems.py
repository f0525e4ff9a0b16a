"""The scripted chat model, the ``echo`` tool and the systems under test.

The model reads its step from the newest ``ToolMessage`` (call ids ``call_<step>_<index>``), so a
call looks only at the tail; it formats tools like a provider, answers with text when no tool is
bound, reports ``usage_metadata`` (about 4 characters per token) and logs each reply's time and kind.
A system's ``build(model, tools, n, saver)`` gives an invoker that runs one task on a fresh thread
(called: ``invoke``; ``.ainvoke``: ``ainvoke``, the bare loops then with ``async def`` nodes).

Example:
    >>> import asyncio
    >>> model, tool = EchoModel(n_rounds=2), make_echo()
    >>> bare = next(s for s in PEER_SYSTEMS if s.name == "bare_toolnode")
    >>> invoker = bare.build(model, [tool], 2, None)
    >>> invoker("go")["messages"][-1].content, asyncio.run(invoker.ainvoke("go"))["messages"][-1].content
    ('Done after 2 rounds.', 'Done after 2 rounds.')
    >>> model.log.kinds[:3], model.log.input_tokens[:3]
    (['tool_calls', 'tool_calls', 'answer'], [4, 18, 32])
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import random
import re
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

MODEL_NAME = "scripted"
FORCED_ANSWER = "Final answer (no tools available): summarising what was collected so far."
_CALL_ID = re.compile(r"^call_(\d+)_\d+$")
Reply = str | list[tuple[str, dict[str, Any]]]
"""A scripted reply: answer text, or a list of ``(tool_name, args)`` calls."""


@dataclass
class CallLog:
    """Per model call: its time, tokens and kind (``tool_calls``, ``answer``, ``forced``: no tools
    bound, ``gave_up``: ``max_steps`` reached)."""

    timestamps: list[float] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(self.input_tokens) + sum(self.output_tokens)


@dataclass
class ToolCounter:
    """Counts tool executions (shared by the tools of one run)."""

    count: int = 0


def message_tokens(message: BaseMessage) -> int:
    """Deterministic token estimate of one message (about 4 characters per token)."""
    content = message.content
    chars = len(content if isinstance(content, str) else json.dumps(content, default=str))
    if isinstance(message, AIMessage):
        chars += sum(len(c["name"]) + len(json.dumps(c["args"], sort_keys=True)) for c in message.tool_calls)
    return 4 + chars // 4


def read_tail(messages: Sequence[BaseMessage]) -> tuple[int, str | None]:
    """``(step, last tool result)`` of the current turn, reading only the tail (a user turn is a
    ``HumanMessage`` without a name that does not follow a tool result: not an injected notice)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolMessage) and (match := _CALL_ID.match(message.tool_call_id)):
            return int(match.group(1)) + 1, str(message.content)
        if isinstance(message, HumanMessage) and not message.name and (
                index == 0 or not isinstance(messages[index - 1], ToolMessage)):
            return 0, None
    return 0, None


def input_tokens(messages: Sequence[BaseMessage], *, exact: bool = False) -> int:
    """Context size of a request: from the previous reply's usage plus what came after it (O(tail);
    it over-counts a message that was in the previous request only), or, ``exact``, every message."""
    if exact:
        return sum(message_tokens(m) for m in messages)
    total = 0
    for message in reversed(messages):
        usage = getattr(message, "usage_metadata", None)
        ours = isinstance(message, AIMessage) and message.response_metadata.get("model_name") == MODEL_NAME
        if ours and usage:
            return total + usage["input_tokens"] + usage["output_tokens"]
        total += message_tokens(message)
    return total


class ScriptedChatModel(BaseChatModel):
    """Base class: subclasses implement :meth:`script`. From ``max_steps`` on the model gives up
    and answers; ``exact_tokens`` counts input tokens over the whole request."""

    max_steps: int = 1_000
    exact_tokens: bool = False
    log: CallLog = Field(default_factory=CallLog)

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def script(self, step: int, last_result: str | None) -> Reply:
        """The reply for ``step`` (0-based) given the latest tool result."""
        raise NotImplementedError

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Format tools as OpenAI tool schemas and bind them, like a real provider."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        """Produce the scripted reply with usage metadata and log the call."""
        self.log.timestamps.append(time.perf_counter())
        step, last_result = read_tail(messages)
        reply: Reply
        if not kwargs.get("tools") or kwargs.get("tool_choice") == "none":
            reply, kind = FORCED_ANSWER, "forced"
        elif step >= self.max_steps:
            reply, kind = f"Giving up after {step} tool rounds.", "gave_up"
        else:
            reply = self.script(step, last_result)
            kind = "answer" if isinstance(reply, str) else "tool_calls"
        message = AIMessage(content=reply) if isinstance(reply, str) else AIMessage(content="", tool_calls=[
            {"name": name, "args": args, "id": f"call_{step}_{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(reply)])
        n_in, n_out = input_tokens(messages, exact=self.exact_tokens), message_tokens(message)
        message.usage_metadata = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        message.response_metadata = {"model_name": MODEL_NAME,
                                     "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}
        self.log.input_tokens.append(n_in)
        self.log.output_tokens.append(n_out)
        self.log.kinds.append(kind)
        return ChatResult(generations=[ChatGeneration(message=message)])


class EchoModel(ScriptedChatModel):
    """Calls ``echo(x)`` once per model call for ``n_rounds`` rounds, then answers."""

    n_rounds: int

    def script(self, step: int, last_result: str | None) -> Reply:
        """Echo ``round <step>`` until ``n_rounds`` results are in."""
        if step < self.n_rounds:
            return [("echo", {"x": f"round {step}"})]
        return f"Done after {self.n_rounds} rounds."


def echo_text(x: str, payload_bytes: int = 0) -> str:
    """What ``echo(x)`` returns: ``x``, padded to ``payload_bytes``."""
    return x if payload_bytes <= len(x) else x + " " + "x" * (payload_bytes - len(x) - 1)


_WORDS = ("app", "core", "util", "models", "views", "api", "client", "server", "parser", "config", "db")


def coding_output(seed: int, step: int, low: int = 5_000, high: int = 50_000) -> str:
    """A coding agent's tool output of ``low``-``high`` characters, different for every (seed, step):
    a build log (timestamps, durations, temp paths), a file listing, test output (addresses,
    durations) or grep hits, the volatile parts a loop detector normalizes included.

    Example:
        >>> a, b = coding_output(1, 0), coding_output(2, 0)
        >>> a != b and a == coding_output(1, 0) and 5_000 <= len(a) <= 50_100
        True
    """
    rng = random.Random(seed * 100_003 + step)
    size, kind, lines, total = rng.randint(low, high), step % 4, [f"$ step {step} (seed {seed})"], 0
    while total < size:
        n, w, v = rng.getrandbits(30), rng.choice(_WORDS), rng.choice(_WORDS)
        path = f"src/{v}/{w}_{n % 977}.{('py', 'java', 'ts', 'go', 'rs')[n % 5]}"
        line = [[f"2025-11-{n % 28 + 1:02d} {n % 24:02d}:{n % 60:02d}:{n % 59:02d},{n % 999:03d} INFO [{w}] "
                 f"task :{v}:compile took {n % 5000}ms, output in /tmp/build{n:x}/classes",
                 f"{path}:{n % 400}: warning: unused variable '{w}{n % 50}' [-Wunused-variable]"],
                [f"-rw-r--r-- 1 agent agent {n % 10**6:>7} Nov {n % 28 + 1:2d} {n % 24:02d}:{n % 60:02d} "
                 f"{path}"],
                [f"{path}::test_{w}_{n % 300} {('PASSED', 'FAILED')[n % 7 == 0]} [{n % 100:3d}%]",
                 f"E   <{w.title()} object at 0x7f{n:08x}> != {v!r}",
                 f"{n % 80} passed, {n % 3} failed in {n % 9}.{n % 1000:03d}s"],
                [f"{path}:{n % 2000}:    {w} = {v}_{n % 77}({w}, key={n % 13})"]][kind]
        lines.append(line[n % len(line)])
        total += len(lines[-1]) + 1
    return "\n".join(lines)


def make_echo(payload_bytes: int = 0, counter: ToolCounter | None = None,
              outputs: Sequence[str] = ()) -> BaseTool:
    """Build the ``echo`` tool; with ``payload_bytes`` its output is padded to that size, with
    ``outputs`` it returns ``outputs[i]`` for ``round i``."""
    tally = counter if counter is not None else ToolCounter()

    @tool("echo")
    def echo(x: str) -> str:
        """Echo the text ``x`` back."""
        tally.count += 1
        return outputs[int(x.rsplit(maxsplit=1)[-1])] if outputs else echo_text(x, payload_bytes)

    return echo


Saver = BaseCheckpointSaver[Any] | None
Builder = Callable[[BaseChatModel, list[BaseTool], int, Saver], Any]


@dataclass(frozen=True)
class System:
    """A named system; ``checkpoints`` is False when it cannot take a checkpointer."""

    name: str
    build: Builder
    checkpoints: bool = True


def recursion_limit(n: int) -> int:
    """A recursion limit no system reaches within ``n`` rounds (10 supersteps per round)."""
    return max(1_000, 10 * n + 100)


class PlainInvoker:
    """``bound.invoke`` + ``tool.invoke`` in a while loop (``ainvoke`` for :meth:`ainvoke`)."""

    def __init__(self, model: BaseChatModel, tools: list[BaseTool]) -> None:
        self.bound, self.tools = model.bind_tools(tools), {t.name: t for t in tools}

    def __call__(self, prompt: str) -> dict[str, Any]:
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        while (ai := self.bound.invoke(messages)).tool_calls:
            messages += [ai, *(self.tools[tc["name"]].invoke(tc) for tc in ai.tool_calls)]
        return {"messages": [*messages, ai]}

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        while (ai := await self.bound.ainvoke(messages)).tool_calls:
            messages += [ai, *[await self.tools[tc["name"]].ainvoke(tc) for tc in ai.tool_calls]]
        return {"messages": [*messages, ai]}


class GraphInvoker:
    """Runs a compiled graph (``agraph``, of async nodes, for ``ainvoke``) on a fresh thread each time."""

    def __init__(self, graph: Any, n: int, agraph: Any = None) -> None:
        self.graph, self.agraph, self.n = graph, graph if agraph is None else agraph, n
        self._threads = itertools.count()

    def _args(self, prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        thread = {"thread_id": f"bench-{next(self._threads)}"}
        return {"messages": [HumanMessage(prompt)]}, {"recursion_limit": recursion_limit(self.n),
                                                      "configurable": thread}

    def __call__(self, prompt: str) -> Any:
        return self.graph.invoke(*self._args(prompt))

    async def ainvoke(self, prompt: str) -> Any:
        return await self.agraph.ainvoke(*self._args(prompt))

    def debug_events(self, prompt: str) -> list[dict[str, Any]]:
        """Run one task; its ``stream_mode="debug"`` events (for counting steps and checkpoints)."""
        return list(self.graph.stream(*self._args(prompt), stream_mode="debug"))


def bare_graph(model: BaseChatModel, tools: list[BaseTool], kind: Literal["direct", "toolnode"], *,
               asynchronous: bool = False, checkpointer: Saver = None,
               state_schema: type[Any] = MessagesState) -> Any:
    """The bare two-node loop, compiled: ``model`` ⇄ ``tools``, nothing else."""
    bound, by_name = model.bind_tools(tools), {t.name: t for t in tools}

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def acall_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    def call_tools(state: MessagesState) -> dict[str, list[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [by_name[tc["name"]].invoke(tc) for tc in last.tool_calls]}

    async def acall_tools(state: MessagesState) -> dict[str, list[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [await by_name[tc["name"]].ainvoke(tc) for tc in last.tool_calls]}

    def route(state: MessagesState) -> Literal["tools", "__end__"]:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"

    builder = StateGraph(state_schema)
    builder.add_node("model", acall_model if asynchronous else call_model, input_schema=state_schema)
    if kind == "toolnode":
        builder.add_node("tools", ToolNode(tools))
        builder.add_conditional_edges("model", tools_condition)
    else:
        builder.add_node("tools", acall_tools if asynchronous else call_tools, input_schema=state_schema)
        builder.add_conditional_edges("model", route)
    builder.add_edge(START, "model")
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def _bare(kind: Literal["direct", "toolnode"],
          schema: Callable[[], type[Any]] = lambda: MessagesState) -> Builder:
    """The bare loop of ``kind`` over ``schema()``: sync nodes for ``invoke``, async for ``ainvoke``."""
    return lambda model, tools, n, saver: GraphInvoker(
        bare_graph(model, tools, kind, checkpointer=saver, state_schema=schema()), n,
        bare_graph(model, tools, kind, asynchronous=True, checkpointer=saver, state_schema=schema()))


def _react(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
    with warnings.catch_warnings():  # deprecated in favour of create_agent
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return GraphInvoker(create_react_agent(model, tools, checkpointer=saver), n)


class DeerFlowGuard:
    """deer-flow's layer-1 rule: identical tool-call sets within a window of responses."""

    def __init__(self, warn_threshold: int = 3, hard_limit: int = 5, window_size: int = 20) -> None:
        """Thresholds as in deer-flow's ``LoopDetectionConfig`` defaults."""
        self.warn_threshold, self.hard_limit = warn_threshold, hard_limit
        self.history: deque[str] = deque(maxlen=window_size)
        self.warned: set[str] = set()

    def check(self, message: AIMessage) -> Literal["ok", "warn", "stop"]:
        """Record one tool-calling response (MD5 of its calls' sorted ``name:args``) and decide."""
        keys = sorted(f"{c['name']}:{json.dumps(c['args'], sort_keys=True)}" for c in message.tool_calls)
        digest = hashlib.md5(json.dumps(keys).encode()).hexdigest()[:12]
        self.history.append(digest)
        self.warned &= set(self.history)
        count = self.history.count(digest)
        if count >= self.hard_limit:
            return "stop"
        if count >= self.warn_threshold and digest not in self.warned:
            self.warned.add(digest)
            return "warn"
        return "ok"



class DeerFlowMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """deer-flow's middleware form: ``after_model`` checks each reply against a guard kept in process
    memory per thread (a graph step every round); a warning is appended to the next request only."""

    def __init__(self) -> None:
        super().__init__()
        self.guards: dict[Any, DeerFlowGuard] = {}
        self.pending: dict[Any, str] = {}

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        thread = (runtime.context or {}).get("thread_id") if isinstance(runtime.context, dict) else None
        ai = state["messages"][-1]
        verdict = self.guards.setdefault(thread, DeerFlowGuard()).check(ai) if ai.tool_calls else "ok"
        if verdict == "warn":
            self.pending[thread] = "[LOOP DETECTED] You are repeating the same tool calls."
        return {"messages": [ai.model_copy(update={"tool_calls": []})]} if verdict == "stop" else None

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        warning = self.pending.pop(None, None)
        extra = [HumanMessage(warning, name="loop_warning")] if warning else []
        return handler(request.override(messages=[*request.messages, *extra]) if extra else request)


def _create_agent(kind: Literal["plain", "limits", "loop_mw", "deerflow"]) -> Builder:
    """``create_agent``, with both limit middlewares at ``run_limit=N+10``, our
    ``LoopDetectionMiddleware``, or deer-flow's kind of loop middleware."""
    def build(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
        from langchain.agents import create_agent
        from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware

        middleware: list[Any] = []
        if kind == "limits":
            middleware = [ModelCallLimitMiddleware(run_limit=n + 10, exit_behavior="end"),
                          ToolCallLimitMiddleware(run_limit=n + 10, exit_behavior="end")]
        elif kind == "deerflow":
            middleware = [DeerFlowMiddleware()]
        elif kind == "loop_mw":
            from langgraph_loop.middleware import LoopDetectionMiddleware
            middleware = [LoopDetectionMiddleware()]
        return GraphInvoker(create_agent(model, tools, middleware=middleware, checkpointer=saver), n)

    return build


_LOOPGRAPH: list[ModuleType | None] = []


def load_langgraph_loop() -> ModuleType | None:
    """Import the langgraph-loop package once; print why and return None when unavailable."""
    if not _LOOPGRAPH:
        try:
            module: ModuleType | None = importlib.import_module("langgraph_loop")
            for name in ("create_loop_agent", "Limits", "LoopDetection", "LoopState"):
                getattr(module, name)
        except Exception as exc:  # noqa: BLE001 - any import failure means "skip it"
            print(f"langgraph-loop: not available ({type(exc).__name__}: {exc})")
            module = None
        _LOOPGRAPH.append(module)
    return _LOOPGRAPH[0]


def _langgraph_loop(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
    """``create_loop_agent`` with default loop detection; the model-call limit cannot fire."""
    lg = load_langgraph_loop()
    assert lg is not None, "langgraph-loop is not importable"
    return GraphInvoker(lg.create_loop_agent(model, tools, checkpointer=saver,
                                             iterations=lg.Iterations(max_model_calls=n + 10)), n)


PEER_SYSTEMS: tuple[System, ...] = (
    System("plain_loop", lambda model, tools, n, saver: PlainInvoker(model, tools), checkpoints=False),
    System("bare_direct", _bare("direct")),
    System("bare_toolnode", _bare("toolnode")),
    System("create_react_agent", _react),
    System("create_agent", _create_agent("plain")),
    System("create_agent_limits", _create_agent("limits")),
    System("create_agent_deerflow", _create_agent("deerflow")),
)


def all_systems() -> list[System]:
    """The peers, plus ``bare_toolnode_loopstate`` and ``langgraph-loop`` when it can be imported."""
    lg = load_langgraph_loop()
    if lg is None:
        return list(PEER_SYSTEMS)
    return [*PEER_SYSTEMS, System("bare_toolnode_loopstate", _bare("toolnode", lambda: lg.LoopState)),
            System("create_agent_loop_mw", _create_agent("loop_mw")),
            System("langgraph-loop", _langgraph_loop)]
