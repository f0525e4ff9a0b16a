"""Issue 43.3 under ``create_agent``: ``TokenBudgetMiddleware(budget_check_in=True)`` asks in its
``before_model`` hook, so a person's redirect goes through the other ``before_model`` hooks
(``PIIMiddleware`` redacts it, listed before or after ours) and no ``after_model`` hook is shown
a reply twice (``HumanInTheLoopMiddleware`` does not ask again about a call that ran; the call
limits count what ran). A call the hook could not foresee is still never sent over the budget."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ModelRequest,
    PIIMiddleware,
    ToolCallLimitMiddleware,
)
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import LoopDetectionMiddleware, StopReason, TokenBudgetMiddleware
from langgraph_loop.core.messages import is_redirect
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens, asked_numbers, reject, researcher

ADDRESS = "jane.doe@example.com"
REDACTED = "[REDACTED_EMAIL]"
REDIRECT = f"Please wrap up now and mail it to {ADDRESS}."
BUDGET = 3000


@tool
def research(query: str) -> str:
    """Research a query."""
    return f"results for {query}: " + "lorem ipsum " * 60


def pii() -> PIIMiddleware:
    return PIIMiddleware("email", strategy="redact", apply_to_input=True)


def budget() -> TokenBudgetMiddleware:
    return TokenBudgetMiddleware(token_budget=BUDGET, budget_check_in=True)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def go() -> dict[str, Any]:
    return {"messages": [HumanMessage("research this")]}


def approve() -> dict[str, Any]:
    return {"decisions": [{"type": "approve"}]}


def questions(state: Any) -> list[str]:
    """The titles of the questions a paused state asks."""
    return [a["name"] for i in state["__interrupt__"] for a in i.value["action_requests"]]


@pytest.mark.parametrize("ours_first", [False, True])
def test_a_redirect_is_redacted_before_the_model_reads_it(ours_first: bool) -> None:
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(),
                         middleware=[budget(), pii()] if ours_first else [pii(), budget()])
    config = thread()
    paused = agent.invoke(go(), config)
    assert questions(paused) == ["Token budget reached: add more?"]
    calls = len(model.requests)
    done = agent.invoke(Command(resume=add_tokens(2000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    assert len(model.requests) == calls + 1  # the held-back call, sent once
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)
    sent = model.requests[-1]
    assert sent[-1].content == f"Please wrap up now and mail it to {REDACTED}."
    assert is_redirect(sent[-1]) and sent[-2].type == "tool"  # after the results: pairing holds
    kept = [m for m in agent.get_state(config).values["messages"] if is_redirect(m)]
    assert [m.content for m in kept] == [f"Please wrap up now and mail it to {REDACTED}."]


@pytest.mark.parametrize("ours_first", [False, True])
def test_a_new_agent_object_resuming_the_question_redacts_the_redirect(ours_first: bool) -> None:
    """Another process resumes: it knows neither the last request nor the hooks' order but
    from the thread (the question is weighed again with the token estimate)."""
    saver, config, models = InMemorySaver(), thread(), [researcher(), researcher()]
    agents = [create_agent(m, [research], checkpointer=saver, middleware=[budget(), pii()]
                           if ours_first else [pii(), budget()]) for m in models]
    agents[0].invoke(go(), config)
    done = agents[1].invoke(Command(resume=add_tokens(2000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent." and len(models[1].requests) == 1
    (sent,) = models[1].requests
    assert sent[-1].content == f"Please wrap up now and mail it to {REDACTED}." and sent[-2].type == "tool"
    assert [m.content for m in done["messages"] if is_redirect(m)] == [sent[-1].content]


def redacted_everywhere(model: ScriptedChatModel, state: dict[str, Any]) -> None:
    """The redirect reached the model and the thread redacted, after the tool results."""
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)
    assert model.requests[-1][-1].content == f"Please wrap up now and mail it to {REDACTED}."
    assert [m.content for m in state["messages"] if is_redirect(m)] == [model.requests[-1][-1].content]


@pytest.mark.parametrize("ours_first", [False, True])
def test_a_new_agent_object_resuming_a_question_asked_after_the_first_tool_round_redacts(
        ours_first: bool) -> None:
    """The hooks' order is learned in the pass that asks: it is kept with the thread first,
    so that the process resuming jumps back to the hook listed before ours too."""
    saver, config, models = InMemorySaver(), thread(), [researcher(), researcher()]
    agents = [create_agent(m, [research], checkpointer=saver, middleware=[
        TokenBudgetMiddleware(token_budget=600, budget_check_in=True), pii()][::1 if ours_first else -1])
        for m in models]
    paused = agents[0].invoke(go(), config)
    assert questions(paused) == ["Token budget reached: add more?"] and len(models[0].requests) == 1
    assert agents[0].get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    done = agents[1].invoke(Command(resume=add_tokens(3000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent." and len(models[1].requests) == 1
    assert models[1].requests[0][-2].type == "tool"
    redacted_everywhere(models[1], done)


class CountingResearcher(ScriptedChatModel):
    """A researcher whose own token counter counts three times the estimate."""

    def get_num_tokens_from_messages(self, messages: Any, tools: Any = None) -> int:
        return 3 * count_tokens_approximately(messages)


def test_a_new_agent_object_reads_the_answer_even_when_its_estimate_says_the_call_fits() -> None:
    """The question was weighed by the model's own counter; the process resuming it has only
    the token estimate, which says the call fits: the person's answer is still read, once."""
    saver, config = InMemorySaver(), thread()
    models = [CountingResearcher(default=researcher().default, no_tools_reply="final") for _ in range(2)]
    agents = [create_agent(m, [research], checkpointer=saver, middleware=[pii(), budget()])
              for m in models]
    assert questions(agents[0].invoke(go(), config)) == ["Token budget reached: add more?"]
    assert agents[0].get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    done = agents[1].invoke(Command(resume=add_tokens(20000, REDIRECT)), config)
    assert "__interrupt__" not in done and done["messages"][-1].content == "Summary sent."
    assert len(models[1].requests) == 1
    redacted_everywhere(models[1], done)


def test_a_new_threads_first_call_over_the_budget_is_asked_before_the_hooks() -> None:
    """The agent object foresees a thread's first call by its latest request on another
    thread, and knows the hooks' order from it: the hook listed before ours redacts."""
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(), middleware=[pii(), budget()])
    first = thread()
    agent.invoke(go(), first)
    agent.invoke(Command(resume=reject()), first)
    calls, config = len(model.requests), thread()
    paused = agent.invoke({"messages": [HumanMessage("Research this: " + "background " * 900)]}, config)
    assert questions(paused) == ["Token budget reached: add more?"] and len(model.requests) == calls
    assert agent.get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    done = agent.invoke(Command(resume=add_tokens(5000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent." and len(model.requests) == calls + 1
    redacted_everywhere(model, done)


def test_one_object_in_two_agents_with_other_orders_assumes_no_order_for_a_new_thread() -> None:
    """Learned both orders: a new thread's first check-in jumps nowhere (a jump from the first
    hook back to itself is LangGraph's ``KeyError``), and the hook after ours redacts."""
    shared, models = budget(), [researcher(), researcher()]
    ours_first, pii_first = (create_agent(m, [research], checkpointer=InMemorySaver(), middleware=order)
                             for m, order in zip(models, ([shared, pii()], [pii(), shared]), strict=True))
    for agent in (ours_first, pii_first):  # each learns its order in a tool round
        assert questions(agent.invoke(go(), thread())) == ["Token budget reached: add more?"]
    config = thread()
    paused = ours_first.invoke({"messages": [HumanMessage("Research this: " + "background " * 900)]}, config)
    assert ours_first.get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    assert questions(paused) == ["Token budget reached: add more?"]
    done = ours_first.invoke(Command(resume=add_tokens(5000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    redacted_everywhere(models[0], done)


def test_an_agent_objects_first_call_over_the_budget_is_asked_before_the_hooks_after_it() -> None:
    """Nothing seen yet: the thread alone is weighed by the token estimate, before the call."""
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(), middleware=[
        TokenBudgetMiddleware(token_budget=250, budget_check_in=True), pii()])
    config = thread()
    paused = agent.invoke(go(), config)
    assert questions(paused) == ["Token budget reached: add more?"] and model.requests == []
    assert agent.get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    done = agent.invoke(Command(resume=add_tokens(3000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent." and len(model.requests) == 1
    redacted_everywhere(model, done)


def test_the_loop_warning_queued_for_the_call_is_weighed_before_the_hooks() -> None:
    """``LoopDetectionMiddleware`` (listed first) adds its queued warning to the call: the
    check-in counts it in ``before_model``, so the redirect still passes ``PIIMiddleware``."""
    def same(messages: list[BaseMessage]) -> Any:
        return "Summary sent." if any("wrap up" in str(m.content) for m in messages[-2:]) else [
            ("research", {"query": "the same"})]
    model = ScriptedChatModel(default=same, no_tools_reply="final")
    agent = create_agent(model, [research], checkpointer=InMemorySaver(), middleware=[
        LoopDetectionMiddleware(), pii(), TokenBudgetMiddleware(token_budget=2500, budget_check_in=True)])
    config = thread()
    paused = agent.invoke(go(), config)
    assert questions(paused) == ["Token budget reached: add more?"] and len(model.requests) == 3
    state = agent.get_state(config)
    assert state.next == ("TokenBudgetMiddleware.before_model",) and state.values["loop_notices"]
    done = agent.invoke(Command(resume=add_tokens(3000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    sent = model.requests[-1]  # the results, the redirect, then the warning the call was weighed with
    assert sent[-3].type == "tool" and str(sent[-1].content).startswith("Loop warning:")
    assert sent[-2].content == f"Please wrap up now and mail it to {REDACTED}."
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)


@pytest.mark.parametrize("ours_first", [False, True])
def test_a_redirect_with_too_few_tokens_is_asked_about_again_and_redacted(ours_first: bool) -> None:
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(),
                         middleware=[budget(), pii()] if ours_first else [pii(), budget()])
    config = thread()
    agent.invoke(go(), config)
    calls = len(model.requests)
    again = agent.invoke(Command(resume=add_tokens(1, REDIRECT)), config)
    assert questions(again) == ["Token budget reached: add more?"]
    assert asked_numbers(again["__interrupt__"][0].value)[1] == BUDGET + 1
    assert len(model.requests) == calls  # still no call
    done = agent.invoke(Command(resume=approve()), config)
    assert done["messages"][-1].content == "Summary sent." and len(model.requests) == calls + 1
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)
    assert [m.content for m in done["messages"] if is_redirect(m)] == [
        f"Please wrap up now and mail it to {REDACTED}."]


@pytest.mark.parametrize("ours_first", [False, True])
def test_the_approved_call_is_not_asked_about_again_and_the_limits_count_what_ran(
        ours_first: bool) -> None:
    """``HumanInTheLoopMiddleware`` gates the tool that ran just before the check-in; the
    call limits are set so that one more counted call or tool run would stop the run."""
    model = researcher()
    gate = HumanInTheLoopMiddleware(interrupt_on={"research": True})
    limits: list[AgentMiddleware[Any, Any]] = [
        gate, ToolCallLimitMiddleware(thread_limit=4), ModelCallLimitMiddleware(thread_limit=5)]
    agent = create_agent(model, [research], checkpointer=InMemorySaver(),
                         middleware=[budget(), pii(), *limits] if ours_first
                         else [pii(), *limits, budget()])
    config = thread()
    state = agent.invoke(go(), config)
    asked = []
    while "__interrupt__" in state:
        (title,) = questions(state)
        asked.append(title)
        answer = approve() if title == "research" else add_tokens(
            2000, REDIRECT)
        state = agent.invoke(Command(resume=answer), config)
    # four research calls approved one by one, then the budget: no call is asked about twice
    assert asked == ["research"] * 4 + ["Token budget reached: add more?"]
    assert state["messages"][-1].content == "Summary sent." and state.get("stop_reason") is None
    assert len(model.requests) == 5
    values = agent.get_state(config).values
    assert values["thread_model_call_count"] == 5 and values["thread_tool_call_count"] == {"__all__": 4}
    assert sum(m.type == "tool" for m in values["messages"]) == 4


def test_a_persons_stop_ends_with_the_final_answer_without_asking_again() -> None:
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(),
                         middleware=[pii(), budget()])
    config = thread()
    agent.invoke(go(), config)
    calls = len(model.requests)
    done = agent.invoke(Command(resume=reject("Enough.")), config)
    assert "__interrupt__" not in done
    assert done["stop_reason"] == StopReason.TOKEN_BUDGET
    assert done["stop_guard"]["human"] == {"action": "stop", "message": "Enough."}
    assert len(model.requests) == calls + 1 and model.request_tools[-1] == []
    assert done["messages"][-1].content == "final"


class ContextPerCall(AgentMiddleware[Any, Any]):
    """A wrapper that adds a long context message to each call (no hook sees it coming)."""

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        extra = HumanMessage("Context for this step: " + "background facts " * 150)
        return handler(request.override(messages=[*request.messages, extra]))


def test_a_call_the_hook_could_not_foresee_is_still_held_back_and_asked_about() -> None:
    """The residual case: the wrapper listed before ours adds tokens after our ``before_model``
    weighed the call; the model step asks (its redirect passes no hook) and sends nothing over."""
    model, plain = researcher(), researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(),
                         middleware=[ContextPerCall(), budget()])
    config = thread()
    paused = agent.invoke(go(), config)
    assert questions(paused) == ["Token budget reached: add more?"]
    assert agent.get_state(config).next == ("model",)  # asked in the model step
    foreseen = create_agent(plain, [research], checkpointer=InMemorySaver(), middleware=[budget()])
    foreseen.invoke(go(), thread())
    assert len(model.requests) < len(plain.requests)  # held back a call earlier than without it
    calls = len(model.requests)
    done = agent.invoke(Command(resume=add_tokens(5000, "Please wrap up now.")), config)
    assert done["messages"][-1].content == "Summary sent." and len(model.requests) == calls + 1
    assert is_redirect(model.requests[-1][-1]) and model.requests[-1][-3].type == "tool"
    total = sum(m.usage_metadata["total_tokens"] for m in done["messages"]
                if m.type == "ai" and m.usage_metadata)
    assert total <= BUDGET + 5000


async def test_the_async_agent_redacts_the_redirect_with_the_hook_listed_after_pii() -> None:
    model = researcher()
    agent = create_agent(model, [research], checkpointer=InMemorySaver(), middleware=[pii(), budget()])
    config = thread()
    assert questions(await agent.ainvoke(go(), config)) == ["Token budget reached: add more?"]
    assert (await agent.aget_state(config)).next == ("TokenBudgetMiddleware.before_model",)
    done = await agent.ainvoke(Command(resume=add_tokens(2000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    assert model.requests[-1][-1].content == f"Please wrap up now and mail it to {REDACTED}."
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)


def test_in_a_chat_the_next_message_over_a_spent_thread_budget_is_asked_about_before_the_hooks(
        ) -> None:
    """``budget_scope="thread"``: the check-in comes at a run's first call, before any tool
    round of that run (the hooks' order known from earlier runs); the hook listed before ours
    redacts the redirect."""
    def chat(messages: list[BaseMessage]) -> Any:
        if "wrap up" in str(messages[-1].content):
            return "Summary sent."
        asked = max(i for i, m in enumerate(messages) if m.type == "human")
        done = sum(m.type == "tool" for m in messages[asked:])
        return [("research", {"query": f"q{len(messages)}"})] if done < 1 else "Here is what I have."
    model = ScriptedChatModel(default=chat, no_tools_reply="final")
    agent = create_agent(model, [research], checkpointer=InMemorySaver(), middleware=[
        pii(), TokenBudgetMiddleware(token_budget=BUDGET, budget_check_in=True, budget_scope="thread")])
    config = thread()
    state = agent.invoke(go(), config)
    while "__interrupt__" not in state:
        state = agent.invoke({"messages": [HumanMessage("And more on this: " + "detail " * 150)]}, config)
    assert state["messages"][-1].type == "human"  # asked before the run's first call
    assert agent.get_state(config).next == ("TokenBudgetMiddleware.before_model",)
    done = agent.invoke(Command(resume=add_tokens(2000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    assert model.requests[-1][-1].content == f"Please wrap up now and mail it to {REDACTED}."
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)
