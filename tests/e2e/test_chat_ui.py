"""What a chat UI (LangChain's Agent Chat UI) reads from a thread, at both front doors: the
notices' ids (``do-not-render-``: kept out of the person's transcript, still sent to the
model), the loop question and the budget check-in as human-in-the-loop requests and their
answers, a message typed instead of an answer (after the UI's placeholder answer), and a
budget per thread. Agent Chat UI's own rules are restated here from its source
(``src/lib/ensure-tool-responses.ts``, ``src/lib/agent-inbox-interrupt.ts``)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import BudgetPressure, Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.messages import is_notice, is_redirect
from langgraph_loop.core.prompts import TYPED_INSTEAD
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens, approve, asked_numbers, edit, reject

HIDDEN = "do-not-render-"
"""Agent Chat UI's ``DO_NOT_RENDER_ID_PREFIX``."""
PLACEHOLDER = "Successfully handled tool call."
"""What Agent Chat UI answers an unanswered call with before a new message
(``ensureToolCallsHaveResponses``)."""
RUNS: Counter[str] = Counter()


@tool
def status(job: str) -> str:
    """The status of a build job."""
    RUNS["status"] += 1
    return f"{job}: pending"


@tool
def search(query: str) -> str:
    """Search the docs."""
    RUNS["search"] += 1
    return f"results for {query}: " + "a long page of results " * 30


def polling(messages: list[BaseMessage]) -> Any:
    """A model that asks for the same status forever."""
    return [("status", {"job": "build"})]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    RUNS.clear()


def user(text: str) -> dict[str, Any]:
    """A new message as Agent Chat UI sends it (text blocks, a fresh id)."""
    return {"messages": [HumanMessage([{"type": "text", "text": text}], id=str(uuid.uuid4()))]}


def rendered(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What Agent Chat UI shows: every message whose id does not start with the prefix."""
    return [m for m in messages if not str(m.id or "").startswith(HIDDEN)]


def is_agent_inbox_request(value: Any) -> bool:
    """Agent Chat UI's ``isAgentInboxInterruptSchema``: the buttons panel, not a raw table."""
    actions, configs = value.get("action_requests"), value.get("review_configs")
    return (isinstance(actions, list) and bool(actions) and isinstance(configs, list) and bool(configs)
            and all(isinstance(a.get("name"), str) and isinstance(a.get("args"), dict) for a in actions)
            and all(isinstance(c.get("action_name"), str) and isinstance(c.get("allowed_decisions"), list)
                    for c in configs))


def loop_graph(model: ScriptedChatModel, saver: Any = None, **kwargs: Any) -> Any:
    return create_loop_agent(model, [status], checkpointer=saver, **kwargs)


def loop_agent(model: ScriptedChatModel, saver: Any = None, detection: LoopDetection | None = None,
               **kwargs: Any) -> Any:
    return create_agent(model, [status], checkpointer=saver,
                        middleware=[LoopDetectionMiddleware(detection, **kwargs)])


# --- notices -------------------------------------------------------------------------------

def test_notices_are_not_rendered_in_the_chat_and_the_model_still_reads_them(
        scripted: list[ScriptedChatModel]) -> None:
    graph_model = ScriptedChatModel(default=polling, no_tools_reply="I kept asking; it is pending.")
    agent_model = ScriptedChatModel(default=polling, no_tools_reply="I kept asking; it is pending.")
    scripted += [graph_model, agent_model]
    outputs = [loop_graph(graph_model).invoke(user("is the build done?")),
               loop_agent(agent_model).invoke(user("is the build done?"))]
    for out, model in zip(outputs, (graph_model, agent_model), strict=True):
        assert out["stop_reason"] == StopReason.LOOP_DETECTED
        notices = [m for m in out["messages"] if is_notice(m)]
        assert [m.name for m in notices][-1] == "stop_notice" and "loop_notice" in [m.name for m in notices]
        assert all(str(m.id).startswith(HIDDEN) for m in notices)
        sent = {m.id for request in model.requests for m in request}
        assert {m.id for m in notices} <= sent  # every notice reached the model
        # the person sees their question, the calls, the results and the answer: nothing
        # in their own voice but what they typed
        humans = [m for m in rendered(out["messages"]) if m.type == "human"]
        assert [m.content for m in humans] == [[{"type": "text", "text": "is the build done?"}]]
        assert rendered(out["messages"])[-1].content == "I kept asking; it is pending."
        assert "repeating yourself" in str(notices[-1].content)


def test_show_notices_gives_them_ids_a_chat_ui_renders(scripted: list[ScriptedChatModel]) -> None:
    graph_model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    agent_model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    scripted += [graph_model, agent_model]
    for out in (loop_graph(graph_model, show_notices=True).invoke(user("done?")),
                loop_agent(agent_model, show_notices=True).invoke(user("done?"))):
        notices = [m for m in out["messages"] if is_notice(m)]
        assert len(notices) >= 2 and not any(str(m.id).startswith(HIDDEN) for m in notices)
    with pytest.raises(ValueError, match="show_notices must be True or False"):
        loop_graph(graph_model, show_notices="yes")
    with pytest.raises(ValueError, match="show_notices must be True or False"):
        LoopDetectionMiddleware(show_notices=1)  # type: ignore[arg-type]


def researching(messages: list[BaseMessage]) -> Any:
    """Search something new every round."""
    return [("search", {"query": f"topic {len(messages)}"})]


def test_the_budget_notices_are_not_rendered_either(scripted: list[ScriptedChatModel]) -> None:
    pressured = ScriptedChatModel(default=researching, no_tools_reply="Wrapping up.")
    stopped = ScriptedChatModel(default=researching, no_tools_reply="What I found.")
    scripted += [pressured, stopped]
    graph_out = create_loop_agent(pressured, [search], limits=Limits(
        token_budget=6000, budget_pressure=BudgetPressure(threshold=0.3))).invoke(user("research"))
    agent_out = create_agent(stopped, [search], middleware=[
        TokenBudgetMiddleware(token_budget=3000)]).invoke(user("research"))
    assert graph_out["stop_reason"] == agent_out["stop_reason"] == StopReason.TOKEN_BUDGET
    names = [[m.name for m in out["messages"] if is_notice(m)] for out in (graph_out, agent_out)]
    assert names == [["budget_notice", "stop_notice"], ["stop_notice"]]
    for out in (graph_out, agent_out):
        assert [m.type for m in rendered(out["messages"]) if m.type == "human"] == ["human"]


# --- the loop question -----------------------------------------------------------------------

def test_the_loop_question_is_the_same_human_in_the_loop_request_at_both_front_doors(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    graph_model, agent_model = ScriptedChatModel(default=polling), ScriptedChatModel(default=polling)
    scripted += [graph_model, agent_model]
    asking = LoopDetection(ask_human=True)
    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:
        config = {"configurable": {"thread_id": "q"}}
        graph_asks = loop_graph(graph_model, saver, loop_detection=asking).invoke(user("done?"), config)
        config = {"configurable": {"thread_id": "q2"}}
        agent_asks = loop_agent(agent_model, saver, asking).invoke(user("done?"), config)
    (graph_q,), (agent_q,) = graph_asks["__interrupt__"], agent_asks["__interrupt__"]
    assert graph_q.value == agent_q.value and is_agent_inbox_request(graph_q.value)
    (action,) = graph_q.value["action_requests"]
    # the title says why; the one row a person sees is an empty hint, no developer JSON
    assert action["name"] == "Loop detected: status" and action["args"] == {"hint": ""}
    text = action["description"]
    assert text.startswith('The agent is repeating itself: it asked for status({"job":"build"}) 3 times')
    for says in ("- Approve: let it run the call and go on", "- Edit: write a hint",
                 "- Reject: stop here"):
        assert says in text
    assert graph_q.value["review_configs"] == [
        {"action_name": "Loop detected: status", "allowed_decisions": ["approve", "edit", "reject"]}]


def paused_at_the_loop_question(runnable: Any, config: Any) -> AIMessage:
    """Run until the loop question; the reply whose calls are paused."""
    out = runnable.invoke(user("is the build done?"), config)
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "Loop detected: status"
    paused = out["messages"][-1]
    assert isinstance(paused, AIMessage) and paused.tool_calls
    return paused


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_a_message_typed_at_the_loop_question_is_a_redirect_and_the_detector_goes_on(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: str) -> None:
    """Agent Chat UI answers the paused call with a placeholder, then sends the message: the
    call is recorded as not run, and a model that goes back to the same call is asked again
    at once (its detector did not start over), with the tool not run again."""
    model = ScriptedChatModel(default=polling, no_tools_reply="Still pending.")
    scripted.append(model)
    asking = LoopDetection(ask_human=True)
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        runnable = (loop_graph(model, saver, loop_detection=asking) if door == "graph"
                    else loop_agent(model, saver, asking))
        config = {"configurable": {"thread_id": door}}
        paused = paused_at_the_loop_question(runnable, config)
        assert RUNS["status"] == 3
        calls_before = len(model.requests)
        placeholder = ToolMessage(PLACEHOLDER, tool_call_id=paused.tool_calls[0]["id"],
                                  name="status", id=f"{HIDDEN}{uuid.uuid4()}")
        typed = user("continue")
        out = runnable.invoke({"messages": [placeholder, *typed["messages"]]}, config)
        # asked again after one model call: the same call, not run, no fresh window
        assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "Loop detected: status"
        assert len(model.requests) == calls_before + 1 and RUNS["status"] == 3
        sent = model.requests[-1]
        answer = next(m for m in sent if isinstance(m, ToolMessage) and m.id == placeholder.id)
        assert answer.content == TYPED_INSTEAD and answer.status == "error"
        assert PLACEHOLDER not in [m.content for m in sent]  # the model was not told it ran
        assert sent[-1].id == typed["messages"][0].id and is_redirect(sent[-1])
        stored = runnable.get_state(config).values["messages"]
        assert [m.content for m in stored if m.id == placeholder.id] == [TYPED_INSTEAD]
        # the person then stops it: nothing more runs, the model answers
        done = runnable.invoke(Command(resume=reject("Stop, thanks.")), config)
    assert done["messages"][-1].content == "Still pending."
    assert RUNS["status"] == 3


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_approve_and_an_edited_hint_answer_the_loop_question(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: str) -> None:
    model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    scripted.append(model)
    asking = LoopDetection(ask_human=True)
    with SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        runnable = (loop_graph(model, saver, loop_detection=asking) if door == "graph"
                    else loop_agent(model, saver, asking))
        config = {"configurable": {"thread_id": door}}
        paused_at_the_loop_question(runnable, config)
        again = runnable.invoke(Command(resume=approve()), config)
        assert RUNS["status"] >= 4 and "__interrupt__" in again  # it ran; asked when it repeats
        ran = RUNS["status"]
        hinted = runnable.invoke(Command(resume=edit("Loop detected: status",
                                                     hint="The job is stuck; say so.")), config)
    assert RUNS["status"] > ran and "__interrupt__" in hinted
    notices = [m for r in model.requests for m in r if is_notice(m) and "say so" in str(m.content)]
    assert notices and all(str(m.id).startswith(HIDDEN) for m in notices)


# --- the budget ------------------------------------------------------------------------------

def budget_graph(model: ScriptedChatModel, saver: Any, budget: int, scope: str = "run") -> Any:
    return create_loop_agent(model, [search], checkpointer=saver, limits=Limits(
        token_budget=budget, budget_check_in=True, budget_scope=scope))


def budget_agent(model: ScriptedChatModel, saver: Any, budget: int, scope: str = "run") -> Any:
    return create_agent(model, [search], checkpointer=saver, middleware=[
        TokenBudgetMiddleware(token_budget=budget, budget_check_in=True, budget_scope=scope)])  # type: ignore[arg-type]


def two_rounds(messages: list[BaseMessage]) -> Any:
    """Two searches after each user message, then an answer."""
    since = next(i for i in range(len(messages) - 1, -1, -1)
                 if messages[i].type == "human" and not is_notice(messages[i]))
    rounds = sum(isinstance(m, AIMessage) for m in messages[since:])
    return [("search", {"query": f"q{len(messages)}"})] if rounds < 2 else "Here is what I found."


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_a_budget_per_thread_counts_the_earlier_messages_of_the_chat(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: str) -> None:
    """Per run, every message of a chat starts with a whole budget; per thread, the second
    message is asked about the budget the first one used (and what the person adds stays)."""
    make = budget_graph if door == "graph" else budget_agent
    per_run, per_thread = ScriptedChatModel(default=two_rounds), ScriptedChatModel(default=two_rounds)
    scripted += [per_run, per_thread]
    with SqliteSaver.from_conn_string(str(tmp_path / "b.db")) as saver:
        runs = make(per_run, saver, 3500)
        threads = make(per_thread, saver, 3500, "thread")
        for runnable, tid in ((runs, "r"), (threads, "t")):
            first = runnable.invoke(user("research A"), {"configurable": {"thread_id": tid}})
            assert "__interrupt__" not in first and first["messages"][-1].content == "Here is what I found."
        first_spent = sum(m.usage_metadata["total_tokens"] for m in first["messages"]
                          if isinstance(m, AIMessage) and m.usage_metadata)
        second_run = runs.invoke(user("research B"), {"configurable": {"thread_id": "r"}})
        second_thread = threads.invoke(user("research B"), {"configurable": {"thread_id": "t"}})
        assert "__interrupt__" not in second_run  # a fresh budget for the new message
        (asked,) = second_thread["__interrupt__"]
        spent, budget, _ = asked_numbers(asked.value)
        second_so_far = sum(m.usage_metadata["total_tokens"] for m in second_thread["messages"]
                            if isinstance(m, AIMessage) and m.usage_metadata) - first_spent
        assert budget == 3500 and spent == first_spent + second_so_far  # the first message counts
        assert "This conversation has used" in asked.value["action_requests"][0]["description"]
        done = threads.invoke(Command(resume=approve()), {"configurable": {"thread_id": "t"}})
        assert done["messages"][-1].content == "Here is what I found."


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_an_edited_number_comes_back_as_text_and_extends_the_budget(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: str) -> None:
    make = budget_graph if door == "graph" else budget_agent
    model = ScriptedChatModel(default=researching, no_tools_reply="What I found so far.")
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "n.db")) as saver:
        runnable, config = make(model, saver, 3000), {"configurable": {"thread_id": door}}
        (asked,) = runnable.invoke(user("research"), config)["__interrupt__"]
        assert is_agent_inbox_request(asked.value)
        (action,) = asked.value["action_requests"]
        assert action["name"] == "Token budget reached: add more?"
        assert list(action["args"]) == ["tokens"] and isinstance(action["args"]["tokens"], int)
        before = len(model.requests)
        (again,) = runnable.invoke(Command(resume=add_tokens("2000")), config)["__interrupt__"]
        assert asked_numbers(again.value)[1] == 5000 and len(model.requests) > before
        done = runnable.invoke(Command(resume=reject("That is enough.")), config)
    assert done["messages"][-1].content == "What I found so far."
    assert str(model.requests[-1][-1].content).endswith("They said: That is enough.")
