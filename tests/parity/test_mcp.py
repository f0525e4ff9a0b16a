"""MCP tools from a real FastMCP server over stdio, through langchain-mcp-adapters (issue 20,
item 6): they work as under ``create_agent``; identical MCP results are identical to the loop
detector; the output cap applies to content blocks; ``readOnlyHint`` is honoured."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from langgraph_loop import Calls, Iterations, Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel, repeat
from tests.conftest import MCPTools
from tests.parity.compare import call, calls, normalise_messages, same

ASK = {"messages": [HumanMessage("Search for the weather.")]}
FINAL = "final answer"


def text_of(message: ToolMessage) -> str:
    """A tool result's text, whether a string or text blocks."""
    if isinstance(message.content, str):
        return message.content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in message.content)


def tool_results(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


async def test_mcp_tools_same_under_both_agents(mcp_tools: MCPTools) -> None:
    """The MCP tools (lookup, content blocks, a side effect) give the same results, messages and
    side effects under ``create_agent`` and ``create_loop_agent``."""
    script = [calls(call("lookup", {"key": "capital"}, "c1"), call("search_blocks", {"query": "w"}, "c2")),
              calls(call("record_note", {"note": "seen"}, "c3")), "done"]
    runs = []
    for build in (create_agent, create_loop_agent):
        model = ScriptedChatModel(script=list(script))
        result = await build(model, mcp_tools.tools).ainvoke(ASK)
        runs.append((normalise_messages(result["messages"]), [normalise_messages(r) for r in model.requests]))
    reference, loop = runs
    same("messages, and what the model saw", loop, reference)
    assert [m["content"] for m in reference[0] if m["type"] == "tool"][:2] == [
        [{"type": "text", "text": "Paris"}],
        [{"type": "text", "text": f"hit {i} for w"} for i in (1, 2, 3)],
    ]
    assert mcp_tools.notes.read_text().splitlines() == ["seen", "seen"]


# --------------------------------------------------------------------------- the loop detector


@tool("search_blocks")
def plain_search_blocks(query: str) -> str:
    """Search (a plain tool with the same answer as the MCP one, as one string)."""
    return "".join(f"hit {i} for {query}" for i in (1, 2, 3))


async def _calls_until_stop(tools: list[BaseTool]) -> tuple[int, dict[str, Any]]:
    """A model that repeats ``search_blocks("weather")`` for ever: how many calls ran before the
    loop detector stopped it."""
    model = ScriptedChatModel(default=repeat([("search_blocks", {"query": "weather"})]), no_tools_reply=FINAL)
    result = await create_loop_agent(model, tools, iterations=Iterations(max_model_calls=40)).ainvoke(ASK)
    executed = [m for m in tool_results(result) if m.status != "error"]
    return len(executed), result


async def test_identical_mcp_results_are_identical_to_the_detector(mcp_tools: MCPTools) -> None:
    """Each MCP result's blocks carry a fresh random ``id``; a looping MCP call must still be
    stopped as fast as the same loop on a plain tool, and not as "results were changing"."""
    plain_count, plain = await _calls_until_stop([plain_search_blocks])
    mcp_count, result = await _calls_until_stop(mcp_tools.tools)
    assert plain["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert mcp_count == plain_count
    notices = " ".join(str(m.content) for m in result["messages"] if isinstance(m, HumanMessage | AIMessage))
    assert "changing" not in notices


# --------------------------------------------------------------------------- the output cap


async def test_output_cap_applies_to_block_output(mcp_tools: MCPTools) -> None:
    """200,000 characters in one text block are cut to the cap before the model sees them."""
    model = ScriptedChatModel(script=[calls(call("big_output", {}, "c1")), FINAL])
    agent = create_loop_agent(model, mcp_tools.tools, limits=Limits(max_tool_output_chars=1_000))
    result = await agent.ainvoke(ASK)
    [big] = tool_results(result)
    seen = [m for m in model.requests[1] if isinstance(m, ToolMessage)]
    assert len(text_of(big)) <= 1_200, "the stored result is not capped"
    assert len(text_of(seen[0])) <= 1_200, "the model saw the uncapped result"
    assert text_of(big).startswith("0123456789")


# --------------------------------------------------------------------------- readOnlyHint


async def _retries_before_stop(tools: list[BaseTool], detection: LoopDetection) -> int:
    """A model that keeps failing the same ``flaky_job`` call, each time alongside a lookup of a
    new key: a read-only lookup changes nothing, so it must not excuse the retry."""
    counter = iter(range(1000))

    def turn(_messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
        return [("flaky_job", {"job": "j1"}), ("lookup", {"key": f"k{next(counter)}"})]

    model = ScriptedChatModel(default=turn, no_tools_reply=FINAL)
    agent = create_loop_agent(model, [flaky_job, *tools], loop_detection=detection,
                              iterations=Iterations(max_model_calls=30))
    result = await agent.ainvoke(ASK)
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    return sum(1 for m in tool_results(result) if m.name == "flaky_job")


@tool
def flaky_job(job: str) -> str:
    """Start a job (it always fails the same way)."""
    return f"Error: job {job} failed: quota exceeded"


async def test_read_only_hint_is_honoured(mcp_tools: MCPTools) -> None:
    lookup = mcp_tools["lookup"]
    assert lookup.metadata and lookup.metadata["readOnlyHint"] is True
    hinted = await _retries_before_stop([lookup], LoopDetection())
    named = await _retries_before_stop([lookup], LoopDetection(calls=Calls(read_only_tools=("lookup",))))
    unhinted_lookup = lookup.model_copy(update={"metadata": None})
    unhinted = await _retries_before_stop([unhinted_lookup], LoopDetection())
    assert hinted == named, "readOnlyHint must count as declaring the tool read-only"
    # Since issue 22 no other call's fresh result excuses a repeat, so here the hint no longer
    # changes when the loop stops; it is still read from the MCP tool's metadata:
    assert LoopDetection().with_tool_hints([lookup]).calls.read_only_tools == ("lookup",)
    assert LoopDetection().with_tool_hints([unhinted_lookup]).calls.read_only_tools == ()
    assert unhinted == hinted
