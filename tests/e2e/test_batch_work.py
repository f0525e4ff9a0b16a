"""Work through a list is never a loop (issue 37): one call per item, in sequence or in
parallel, answered by the same acknowledgement, runs to its end through both front doors with
the default settings: every item runs, the model is never warned, no call is refused, and the
run ends on the model's own answer. Beside it, the loops the defaults still stop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langgraph_loop import StopReason, create_loop_agent
from langgraph_loop.core.messages import is_blocked, is_notice
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel

Item = tuple[str, dict[str, Any]]


def _tool(name: str, answer: Callable[[dict[str, Any]], str], ran: list[Item]) -> BaseTool:
    def run(**kwargs: Any) -> str:
        ran.append((name, kwargs))
        return answer(kwargs)

    return StructuredTool.from_function(run, name=name, description=f"{name} one item.",
                                        args_schema={"type": "object", "properties": {},
                                                     "additionalProperties": True})


def _const(text: str) -> Callable[[dict[str, Any]], str]:
    return lambda _args: text


# name: (the tool, its acknowledgement, the items, items per reply)
JOBS: dict[str, tuple[str, Callable[[dict[str, Any]], str], list[dict[str, Any]], int]] = {
    "label eight issues": ("add_label", _const("ok"),
                           [{"issue": n, "label": "bug"} for n in range(101, 109)], 1),
    "one email to six people": ("send_email", _const("Message sent."),
                                [{"to": f"{who}@example.com", "subject": "Q3 review",
                                  "body": "The review moved to Friday."}
                                 for who in ("ana", "bo", "chen", "dee", "eli", "fay")], 1),
    "five calendar events": ("create_event", _const("Event created."),
                             [{"title": "standup", "date": f"2026-12-0{d}", "time": "09:30"}
                              for d in range(1, 6)], 1),
    "six INSERTs": ("run_sql", _const("1 row affected"),
                    [{"query": "INSERT INTO orders (id, customer, total, status, created_at) VALUES "
                               f"({n}, 'customer-{n}', {10 * n}.00, 'open', now())"}
                     for n in range(1, 7)], 1),
    "six test files": ("write_file", _const("File written successfully."),
                       [{"path": f"tests/test_module_{n}.py",
                         "content": f"def test_{n}():\n    assert True\n"} for n in range(6)], 1),
    "the suite on five Pythons": ("run_tests", _const("120 passed in 4.2s"),
                                  [{"python": f"3.{v}"} for v in range(9, 14)], 1),
    "baggage on five reservations": ("update_baggage", _const("Reservation updated."),
                                     [{"reservation_id": r, "total_baggages": 2, "nonfree_baggages": 0}
                                      for r in ("HATHAT", "OBUT9V", "XEWRD9", "1QPGQN", "K8M1GV")], 1),
    "delete eleven leads": ("delete_customer", _const("Customer deleted successfully."),
                            [{"customer_id": f"0{n:05d}"} for n in range(11)], 1),
    "six paragraphs, in parallel": ("add_paragraph", lambda a: f"Paragraph added to {a['file']}.",
                                    [{"file": "report.docx", "text": f"Section {n}: findings."}
                                     for n in range(12)], 6),
    "mkdir and copies (long shared prefix)": (
        "run_command", _const("\nCommand completed with return code: 0"),
        [{"command": "cd /workspace/dumps/workspace/Application_Materials_2201210606 && "
                     f"cp ../Application_Materials_flat/{doc}.pdf 02_Documents/"}
         for doc in ("ID_Card", "Enrollment_Certificate", "Transcript", "Recommendation_Letter_1",
                     "Portfolio")], 1),
}


def _script(tool: str, items: list[dict[str, Any]], per_reply: int) -> list[Any]:
    replies: list[Any] = [[(tool, args) for args in items[i:i + per_reply]]
                          for i in range(0, len(items), per_reply)]
    return [*replies, "All done."]


def _agent(door: str, model: ScriptedChatModel, tools: list[BaseTool]) -> Any:
    if door == "create_loop_agent":
        return create_loop_agent(model, tools)
    return create_agent(model, tools, middleware=[LoopDetectionMiddleware()])


def _warnings(requests: list[list[BaseMessage]]) -> list[str]:
    return [str(m.content) for request in requests for m in request if is_notice(m)]


@pytest.mark.parametrize("door", ["create_loop_agent", "create_agent + LoopDetectionMiddleware"])
@pytest.mark.parametrize("job", list(JOBS))
def test_work_through_a_list_runs_to_the_end_unwarned(
        job: str, door: str, scripted: list[ScriptedChatModel]) -> None:
    name, answer, items, per_reply = JOBS[job]
    ran: list[Item] = []
    model = ScriptedChatModel(script=_script(name, items, per_reply))
    scripted.append(model)
    result = _agent(door, model, [_tool(name, answer, ran)]).invoke(
        {"messages": [HumanMessage(f"Please {job}.")]})

    expected = [(name, args) for args in items]  # every item, once (in order when one per reply)
    assert ran == expected if per_reply == 1 else sorted(ran, key=repr) == sorted(expected, key=repr)
    assert _warnings(model.requests) == []  # the model was never told it loops
    assert not any(isinstance(m, ToolMessage) and (is_blocked(m) or m.status == "error")
                   for m in result["messages"])
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == "All done." and not last.tool_calls
    assert result.get("stop_reason") in (StopReason.COMPLETED, None)
    assert len(model.requests) == len(items) // per_reply + (len(items) % per_reply > 0) + 1


@pytest.mark.parametrize("door", ["create_loop_agent", "create_agent + LoopDetectionMiddleware"])
def test_a_batch_then_a_check_that_repeats_nothing_is_left_running(
        door: str, scripted: list[ScriptedChatModel]) -> None:
    """Four INSERTs answered alike, then the SELECT that checks them (a different call)."""
    ran: list[Item] = []
    sql = _tool("run_sql", lambda a: ("Query executed successfully. Total rows: 0"
                                      if a["query"].startswith("INSERT") else "4 rows"), ran)
    inserts = [{"query": f"INSERT INTO `ab_testing.results` (variant, visits) VALUES ('{v}', {n})"}
               for n, v in enumerate("ABCD")]
    check = {"query": "SELECT COUNT(*) FROM `ab_testing.results`"}
    model = ScriptedChatModel(script=[*([("run_sql", q)] for q in inserts), [("run_sql", check)],
                                      "Four rows are in."])
    scripted.append(model)
    result = _agent(door, model, [sql]).invoke({"messages": [HumanMessage("load the results")]})
    assert [args for _, args in ran] == [*inserts, check]
    assert _warnings(model.requests) == [] and result["messages"][-1].content == "Four rows are in."


@pytest.mark.parametrize("door", ["create_loop_agent", "create_agent + LoopDetectionMiddleware"])
def test_the_same_request_answered_alike_is_still_stopped(
        door: str, scripted: list[ScriptedChatModel]) -> None:
    """What the defaults still stop: the same call, back to back, answered the same way: it
    runs three times, the model is warned after the second identical result, and the fourth
    request ends the run with a tools-free answer."""
    ran: list[Item] = []
    model = ScriptedChatModel(default=lambda _m: [("add_label", {"issue": 101, "label": "bug"})],
                              no_tools_reply="Issue 101 is labelled.")
    scripted.append(model)
    result = _agent(door, model, [_tool("add_label", _const("ok"), ran)]).invoke(
        {"messages": [HumanMessage("label issue 101")]})
    assert len(ran) == 3
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    (warning,) = _warnings(model.requests[3:4])
    assert "returned the same result twice in a row before you asked for it again" in warning
    assert result["messages"][-1].content == "Issue 101 is labelled."
