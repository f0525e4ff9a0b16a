"""``TokenBudgetMiddleware`` in LangChain's ``create_agent``: no request over the budget is
sent, the run ends on a final answer that fits, a person can extend, stop or redirect at the
budget (SQLite, a resume in a new agent object), the middleware decides as the graph, and the
loop's other controls still work beside it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from pydantic import Field

from langgraph_loop import (
    Limits,
    LoopDetection,
    LoopDetectionMiddleware,
    StopReason,
    TokenBudgetMiddleware,
    create_loop_agent,
)
from langgraph_loop.core.messages import is_notice, is_redirect
from langgraph_loop.engine.limits import MIN_FINAL_OUTPUT, NO_ANSWER_KIND, estimate_input
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens, asked_numbers, reject

PAGE = "result text " * 60
"""A search result of about 180 tokens."""


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"{query}: {PAGE}"


class RecordingModel(ScriptedChatModel):
    """A scripted model that also records each request's ``max_tokens``."""

    max_tokens_sent: list[int | None] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.max_tokens_sent.append(kwargs.get("max_tokens"))
        return super()._generate(messages, stop, run_manager, **kwargs)


def researching(rounds: int = 100) -> Any:
    """Search until ``rounds`` results are in, then answer."""
    def script(messages: list[BaseMessage]) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return [("search", {"query": f"q{done}"})] if done < rounds else "All found."
    return script


def model(rounds: int = 100, final: str = "Here is what I found so far. " * 200) -> RecordingModel:
    """A researcher whose final answer (no tool usable) is long unless ``max_tokens`` cuts it."""
    return RecordingModel(default=researching(rounds), no_tools_reply=final)


def spent(messages: list[BaseMessage]) -> int:
    """The tokens the replies among ``messages`` reported."""
    return sum(m.usage_metadata["total_tokens"] for m in messages
               if isinstance(m, AIMessage) and m.usage_metadata)


def shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """A request as (kind, text) pairs, tool calls by name and arguments (ids left out)."""
    return [(kind, repr([(c["name"], c["args"]) for c in m.tool_calls])
             if isinstance(m, AIMessage) and m.tool_calls else str(m.content))
            for kind, m in zip(kinds(messages), messages, strict=True)]


def kinds(messages: list[BaseMessage]) -> list[str]:
    return [("notice" if is_notice(m) else "redirect" if is_redirect(m) else m.type)
            for m in messages]


def agent_of(llm: ScriptedChatModel, budget: int = 3000, *, check_in: bool = False,
             **kwargs: Any) -> Any:
    return create_agent(llm, [search], middleware=[TokenBudgetMiddleware(
        token_budget=budget, budget_check_in=check_in)], **kwargs)


def ask(text: str = "research the topic") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# --- at the budget, without a person ---------------------------------------------------------

def test_no_request_over_the_budget_is_sent_and_the_run_ends_on_a_bounded_answer(
        scripted: list[ScriptedChatModel]) -> None:
    llm = model()
    scripted.append(llm)
    result = agent_of(llm, 3000).invoke(ask())

    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    guard = result["stop_guard"]
    assert guard["reason"] == "token_budget" and guard["limit"] == 3000
    # every call the model answered, the final answer included, fits in the budget
    assert spent(result["messages"]) <= 3000
    assert guard["value"] == spent(result["messages"][:-1])  # what was spent before the stop
    # the stopped call was not sent: the last request is the final answer, with the notice
    # after the tool results, every tool defined and none usable
    final = llm.requests[-1]
    assert kinds(final)[-3:] == ["ai", "tool", "notice"]
    assert "token budget" in str(final[-1].content)
    assert llm.request_tools[-1] == [] and llm.request_defined_tools[-1] == ["search"]
    assert llm.request_tool_choice[-1] == "none"
    assert all(tools == ["search"] for tools in llm.request_tools[:-1])
    # its max_tokens is the room left: the budget minus what was spent and its input
    room = 3000 - guard["value"] - estimate_input(final, llm)
    assert llm.max_tokens_sent[-1] == room and llm.max_tokens_sent[:-1] == [None] * (len(llm.requests) - 1)
    assert result["messages"][-1].usage_metadata["output_tokens"] == room
    # the thread: the notice where the model saw it, then the answer, without tool calls
    assert kinds(result["messages"])[-2:] == ["notice", "ai"]
    assert result["messages"][-1].tool_calls == []


def test_the_call_held_back_and_an_answer_after_it_would_have_gone_over(
        scripted: list[ScriptedChatModel]) -> None:
    llm = model()
    scripted.append(llm)
    result = agent_of(llm, 3000).invoke(ask())
    held = len(llm.requests) - 1  # the regular calls sent before the stop
    # the same run without the middleware, a few rounds further
    plain = model(rounds=held + 3)
    scripted.append(plain)
    unbounded = create_agent(plain, [search]).invoke(ask())
    totals = [m.usage_metadata["total_tokens"] for m in unbounded["messages"]
              if isinstance(m, AIMessage)]
    assert [shape(r) for r in llm.requests[:-1]] == [shape(r) for r in plain.requests[:held]]
    assert sum(totals[:held]) == result["stop_guard"]["value"]
    assert sum(totals[:held + 2]) > 3000  # the held-back call, then one more reply: over
    assert spent(result["messages"]) > 3000 - MIN_FINAL_OUTPUT  # the final answer used the room


async def test_the_async_agent_sends_the_same_requests(scripted: list[ScriptedChatModel]) -> None:
    sync_llm, async_llm = model(), model()
    scripted += [sync_llm, async_llm]
    expected = agent_of(sync_llm).invoke(ask())
    got = await agent_of(async_llm).ainvoke(ask())
    assert [shape(r) for r in async_llm.requests] == [shape(r) for r in sync_llm.requests]
    assert async_llm.max_tokens_sent == sync_llm.max_tokens_sent
    assert got["stop_reason"] == expected["stop_reason"] == StopReason.TOKEN_BUDGET
    assert got["stop_guard"] == expected["stop_guard"]


def test_without_room_for_an_answer_no_call_is_made_and_the_run_ends_on_the_loops_reply(
        scripted: list[ScriptedChatModel]) -> None:
    """``messages[-1]`` is never the user's own question: the loop's zero-usage reply says why
    there is no answer, as ``create_loop_agent`` ends the same run."""
    llm, graph_llm = model(), model()
    scripted += [llm, graph_llm]
    result = agent_of(llm, 60).invoke(ask("x" * 100))
    assert llm.requests == []
    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    assert result["stop_guard"]["final_answer"].startswith("skipped: the token budget leaves")
    assert kinds(result["messages"]) == ["human", "ai"]
    reply = result["messages"][-1]
    assert reply.content.startswith("(No answer: the run stopped (token_budget) with about 0 tokens")
    assert reply.additional_kwargs["langgraph_loop"]["kind"] == NO_ANSWER_KIND
    assert spent([reply]) == 0
    graph = create_loop_agent(graph_llm, [search], limits=Limits(token_budget=60)).invoke(ask("x" * 100))
    assert graph_llm.requests == []
    assert [m.content for m in graph["messages"]] == [m.content for m in result["messages"]]


def test_a_run_that_fits_is_untouched_and_costs_no_extra_step(
        scripted: list[ScriptedChatModel]) -> None:
    plain, budgeted = model(rounds=3), model(rounds=3)
    scripted += [plain, budgeted]
    steps = []
    for agent in (create_agent(plain, [search]), agent_of(budgeted, 100_000)):
        chunks = list(agent.stream(ask(), stream_mode="updates"))
        steps.append([next(iter(c)) for c in chunks])
    assert steps[0] == steps[1] == ["model", "tools"] * 3 + ["model"]
    assert [shape(r) for r in budgeted.requests] == [shape(r) for r in plain.requests]
    assert budgeted.max_tokens_sent == [None] * 4


def test_the_budget_is_per_run_and_a_new_run_clears_the_stop(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    llm = model(final="Stopped here.")
    scripted.append(llm)
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        agent = agent_of(llm, 20_000, checkpointer=saver)
        config = {"configurable": {"thread_id": "r"}}
        first = agent.invoke(ask(), config)
        calls = len(llm.requests)
        llm.default = lambda messages: "Thanks, noted."
        second = agent.invoke(ask("thanks"), config)
    assert first["stop_reason"] == StopReason.TOKEN_BUDGET
    # the new run has its own budget: its call was sent, though the thread's replies
    # already spent the whole budget
    assert len(llm.requests) == calls + 1 and llm.request_tools[-1] == ["search"]
    assert spent(second["messages"]) > 20_000
    assert second["stop_reason"] is None and second["stop_guard"] is None
    assert second["messages"][-1].content == "Thanks, noted."


def test_replies_without_usage_are_counted(scripted: list[ScriptedChatModel]) -> None:
    llm = model()
    llm.report_usage = False
    scripted.append(llm)
    result = agent_of(llm, 3000).invoke(ask())
    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    assert 0 < result["stop_guard"]["value"] <= 3000
    assert len(llm.requests) < 10


def test_bad_settings_are_refused() -> None:
    for bad in (0, -5, 1.5, "1000", True):
        with pytest.raises(ValueError, match="token_budget must be a whole number"):
            TokenBudgetMiddleware(token_budget=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget_check_in must be True or False"):
        TokenBudgetMiddleware(token_budget=1000, budget_check_in="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TokenBudgetMiddleware(1000)  # type: ignore[misc]
    # 0.3's spellings name their replacement (the keywords of Limits)
    with pytest.raises(TypeError, match=r"max_tokens=\.\.\.\) was renamed in 0.4: use token_budget="):
        TokenBudgetMiddleware(max_tokens=1000)
    with pytest.raises(TypeError, match="use budget_check_in="):
        TokenBudgetMiddleware(token_budget=1000, check_in=True)
    with pytest.raises(TypeError, match=r"scopes=\.\.\.\) is not a keyword it takes"):
        TokenBudgetMiddleware(token_budget=1000, scopes="run")


# --- checking in with a person ---------------------------------------------------------------

def _paused(llm: ScriptedChatModel, saver: Any, config: Any, budget: int = 3000) -> Any:
    """Run until the budget asks; return the question."""
    paused = agent_of(llm, budget, check_in=True, checkpointer=saver).invoke(ask(), config)
    (question,) = paused["__interrupt__"]
    return question.value


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def test_check_in_asks_before_the_call_and_an_extension_goes_on_in_a_new_agent(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = model(rounds=12), model(rounds=12)
    scripted += [first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "e.db")) as saver:
        config = _config()
        question = _paused(first, saver, config)
        (action,) = question["action_requests"]
        assert action["name"] == "Token budget reached: add more?"
        spent_now, budget, needed = asked_numbers(question)
        assert budget == 3000 and needed > 3000 - spent_now
        assert action["args"]["tokens"] >= needed - (3000 - spent_now)  # approve would be enough
        assert question["review_configs"] == [{"action_name": action["name"],
                                               "allowed_decisions": ["approve", "edit", "reject"]}]
        asked_at = len(first.requests)
        # another process: a new agent object, the same thread
        done = agent_of(second, 3000, check_in=True, checkpointer=saver).invoke(
            Command(resume=add_tokens("20000")), config)  # Agent Chat UI sends an edit as text
    assert "__interrupt__" not in done and done.get("stop_reason") is None
    assert done["messages"][-1].content == "All found."
    # the held-back call is the new agent's first: together the two agents sent exactly the
    # requests of a run without a budget, none twice
    straight = model(rounds=12)
    scripted.append(straight)
    create_agent(straight, [search]).invoke(ask())
    assert asked_at == 4 and asked_at + len(second.requests) == len(straight.requests) == 13
    assert [shape(r) for r in first.requests + second.requests] == [
        shape(r) for r in straight.requests]
    assert spent(done["messages"]) <= 23_000


def test_an_extension_too_small_asks_again_and_a_stop_ends_with_an_answer(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = model(), model()
    scripted += [first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        config = _config()
        question = _paused(first, saver, config)
        agent = agent_of(second, 3000, check_in=True, checkpointer=saver)
        again = agent.invoke(Command(resume=add_tokens(1)), config)
        (asked,) = again["__interrupt__"]
        assert asked_numbers(asked.value)[1] == 3001 and second.requests == []
        done = agent.invoke(Command(resume=reject()), config)
    assert done["stop_reason"] == StopReason.TOKEN_BUDGET
    assert done["stop_guard"]["human"] == {"action": "stop"}
    assert done["stop_guard"]["limit"] == 3001
    assert done["stop_guard"]["value"] == asked_numbers(question)[0]
    assert len(second.requests) == 1 and second.request_tools[-1] == []
    assert kinds(done["messages"])[-3:] == ["tool", "notice", "ai"]
    assert spent(done["messages"]) <= 3001


async def test_a_redirect_reaches_the_model_as_the_users_message(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    def script(messages: list[BaseMessage]) -> Any:
        if "wrap up" in str(messages[-1].content):
            return "Summary of the first results."
        return researching()(messages)

    first = RecordingModel(default=script, no_tools_reply="final")
    second = RecordingModel(default=script, no_tools_reply="final")
    scripted += [first, second]
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "d.db")) as saver:
        config = _config()
        paused = await agent_of(first, 3000, check_in=True, checkpointer=saver).ainvoke(
            ask(), config)
        assert paused["__interrupt__"]
        agent = agent_of(second, 3000, check_in=True, checkpointer=saver)
        # 0.3's answer is refused naming the shape to send, and the run stays paused
        with pytest.raises(ValueError, match=r"0\.3's answer shapes were removed"):
            await agent.ainvoke(
                Command(resume={"action": "redirect", "message": "Please wrap up now."}), config)
        assert (await agent.aget_state(config)).interrupts and second.requests == []
        # too few tokens with the message: the person is asked again, the message kept
        again = await agent.ainvoke(Command(resume=add_tokens(1, "Please wrap up now.")), config)
        assert again["__interrupt__"] and second.requests == []
        done = await agent.ainvoke(Command(resume=add_tokens(2000)), config)
    assert done.get("stop_reason") is None and done["messages"][-1].content == (
        "Summary of the first results.")
    # the message the person wrote is the user's, after the tool results (pairing intact),
    # the last thing the model saw, and kept in the thread; the run is the same run
    (sent,) = second.requests
    assert kinds(sent)[-3:] == ["ai", "tool", "redirect"] and sent[-1].type == "human"
    assert kinds(done["messages"])[-3:] == ["tool", "redirect", "ai"]
    assert [m.content for m in done["messages"] if is_redirect(m)] == ["Please wrap up now."]


def test_a_wrong_answer_raises_writes_nothing_and_the_next_one_works(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = model(rounds=8), model(rounds=8)
    scripted += [first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
        config = _config()
        _paused(first, saver, config)
        agent = agent_of(second, 3000, check_in=True, checkpointer=saver)
        before = agent.get_state(config)
        removed = r"0.3's answer shapes were removed\): answer with LangChain's"
        for wrong, says in [({"action": "extend"}, removed),  # 0.3's answers
                            ({"action": "extend", "tokens": 5000}, removed),
                            ({"action": "redirect", "message": " "}, removed),
                            ({"action": "more"}, removed), (42, "answer with"),
                            (add_tokens(0), "must be a whole number >= 1"),
                            (add_tokens("2k"), "must be a whole number"),
                            ({"decisions": [{"type": "approve"}] * 2}, "one decision")]:
            with pytest.raises(ValueError, match=says):
                agent.invoke(Command(resume=wrong), config)
            after = agent.get_state(config)
            assert after.next == ("TokenBudgetMiddleware.before_model",) and len(after.interrupts) == 1
            assert after.values == before.values
        assert second.requests == []
        done = agent.invoke(Command(resume=add_tokens(10_000)), config)
    assert done.get("stop_reason") is None and done["messages"][-1].content == "All found."


def test_check_in_without_a_checkpointer_stops_as_without_it(
        scripted: list[ScriptedChatModel]) -> None:
    asked, plain = model(), model()
    scripted += [asked, plain]
    result = agent_of(asked, 3000, check_in=True).invoke(ask())
    expected = agent_of(plain, 3000).invoke(ask())
    assert "__interrupt__" not in result
    assert result["stop_reason"] == expected["stop_reason"] == StopReason.TOKEN_BUDGET
    assert [shape(r) for r in asked.requests] == [shape(r) for r in plain.requests]


# --- the same decisions as the graph ---------------------------------------------------------

@pytest.mark.parametrize(("budget", "usage", "prompt"), [
    (1500, True, None), (3000, True, None), (6000, True, "Be thorough."), (3000, False, None)])
def test_the_middleware_stops_where_the_graph_stops(scripted: list[ScriptedChatModel],
                                                    budget: int, usage: bool,
                                                    prompt: str | None) -> None:
    graph_llm, agent_llm = model(), model()
    graph_llm.report_usage = agent_llm.report_usage = usage
    scripted += [graph_llm, agent_llm]
    graph = create_loop_agent(graph_llm, [search], limits=Limits(token_budget=budget),
                              system_prompt=prompt)
    graph_out = graph.invoke(ask())
    agent_out = agent_of(agent_llm, budget, system_prompt=prompt).invoke(ask())
    assert [shape(r) for r in agent_llm.requests] == [shape(r) for r in graph_llm.requests]
    assert agent_llm.max_tokens_sent == graph_llm.max_tokens_sent
    assert agent_out["stop_reason"] == graph_out["stop_reason"] == StopReason.TOKEN_BUDGET
    graph_guard = graph_out["iterations"][-1]["guard"]
    for key in ("limit", "value", "estimate"):
        assert agent_out["stop_guard"][key] == graph_guard[key]


# --- beside the loop's other controls --------------------------------------------------------

def _both(llm: ScriptedChatModel, budget: int, **kwargs: Any) -> Any:
    return create_agent(llm, [search], middleware=[
        LoopDetectionMiddleware(LoopDetection()), TokenBudgetMiddleware(token_budget=budget)],
        **kwargs)


def test_loop_detection_still_stops_a_loop_under_a_budget(scripted: list[ScriptedChatModel]) -> None:
    llm = ScriptedChatModel(default=lambda messages: [("search", {"query": "same"})],
                            no_tools_reply="It keeps returning the same page.")
    scripted.append(llm)
    result = _both(llm, 100_000).invoke(ask())
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["stop_guard"]["guard"] == "loop_detector"  # the one stop record, as the graph's
    assert result["stop_guard"]["layer"] == "no_progress"


def test_the_budget_stops_a_run_the_loop_detector_lets_go_on(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    llm = model(final="Stopped here.")
    scripted.append(llm)
    with SqliteSaver.from_conn_string(str(tmp_path / "b.db")) as saver:
        agent = _both(llm, 20_000, checkpointer=saver)
        config = {"configurable": {"thread_id": "b"}}
        result = agent.invoke(ask(), config)
        assert result["stop_reason"] == StopReason.TOKEN_BUDGET
        assert result["stop_guard"]["guard"] == "limits"
        assert spent(result["messages"]) <= 20_000 and llm.request_tools[-1] == []
        # a new run on the thread: the middleware that wrote the stop record clears it
        llm.default = lambda messages: "ok"
        again = agent.invoke(ask("thanks"), config)
    assert again["stop_reason"] is None and again["stop_guard"] is None


@pytest.mark.parametrize("answers", [
    [add_tokens(1, "Please summarize."), reject()],
    [add_tokens("40"), reject("That is enough.")],
])
def test_the_graph_and_the_middleware_apply_the_same_answers(
        scripted: list[ScriptedChatModel], tmp_path: Path, answers: list[Any]) -> None:
    graph_llm, agent_llm = model(), model()
    scripted += [graph_llm, agent_llm]
    outputs = []
    with SqliteSaver.from_conn_string(str(tmp_path / "p.db")) as saver:
        for runnable in (
                create_loop_agent(graph_llm, [search], checkpointer=saver,
                                  limits=Limits(token_budget=3000, budget_check_in=True)),
                agent_of(agent_llm, 3000, check_in=True, checkpointer=saver)):
            config = _config()
            out = runnable.invoke(ask(), config)
            for answer in answers:
                assert out["__interrupt__"]
                out = runnable.invoke(Command(resume=answer), config)
            outputs.append(out)
    graph_out, agent_out = outputs
    assert [shape(r) for r in agent_llm.requests] == [shape(r) for r in graph_llm.requests]
    assert agent_llm.max_tokens_sent == graph_llm.max_tokens_sent
    assert kinds(agent_llm.requests[-1])[-1] == "notice"
    assert shape(agent_out["messages"]) == shape(graph_out["messages"])
    graph_guard = graph_out["iterations"][-1]["guard"]
    for key in ("limit", "value", "estimate", "human"):
        assert agent_out["stop_guard"][key] == graph_guard[key]
    assert spent(agent_out["messages"]) <= agent_out["stop_guard"]["limit"]
