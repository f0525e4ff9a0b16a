"""How many times a turn reads the thread, by input kind (issue 42): a deterministic count of
the saver's calls, not a timing. A load is a ``get_delta_channel_history`` (the replay of the
writes since the last snapshot of the messages); ``get_tuple`` reads the newest checkpoint row.

New user messages without ids need nothing of the stored thread to be checked: their turn
loads it once (LangGraph's own load). Messages with ids, removals and resumes are checked
against the stored thread before the run, and LangGraph loads it again when the run starts
(its saver is chosen by a private function, ``core/compat.py``): two loads, and never more."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Approval, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, thread


class CountingSaver(InMemorySaver):
    """An ``InMemorySaver`` that counts its reads of the thread."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {"get_tuple": 0, "list": 0, "loads": 0}

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self.reads["get_tuple"] += 1
        return super().get_tuple(config)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        self.reads["list"] += 1
        return super().list(*args, **kwargs)

    def get_delta_channel_history(self, **kwargs: Any) -> Any:
        self.reads["loads"] += 1
        return super().get_delta_channel_history(**kwargs)

    def turn(self, agent: Any, given: Any, config: RunnableConfig) -> dict[str, int]:
        """The reads of one ``invoke``."""
        self.reads = dict.fromkeys(self.reads, 0)
        agent.invoke(given, config)
        return dict(self.reads)


def test_reads_per_turn_by_input_kind() -> None:
    saver = CountingSaver()
    model = ScriptedChatModel(script=["one", "two", "three", "four", [("add", {"a": 1, "b": 2})], "3"])
    agent = create_loop_agent(model, [add], checkpointer=saver, approval=Approval(tools=["add"]))
    config = thread("reads")
    saver.turn(agent, {"messages": [HumanMessage("first")]}, config)
    reads = {
        "new": saver.turn(agent, {"messages": [HumanMessage("again")]}, config),
        "with_id": saver.turn(agent, {"messages": [HumanMessage("mine", id="u1")]}, config),
        "removal": saver.turn(agent, {"messages": [RemoveMessage(id="u1")]}, config),
    }
    saver.turn(agent, {"messages": [HumanMessage("add them")]}, config)  # stops at the approval
    assert agent.get_state(config).interrupts
    reads["resume"] = saver.turn(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert agent.get_state(config).values["messages"][-1].content == "3"
    assert {kind: r["loads"] for kind, r in reads.items()} == {
        "new": 1, "with_id": 2, "removal": 2, "resume": 2}
    assert all(r["list"] == 0 and r["get_tuple"] <= 3 for r in reads.values()), reads
