"""A turn on a long thread (issue 42): the thread is loaded once per turn, and a load replays at
most a snapshot interval of writes, without compaction. Counted on the savers' history reads
(``get_delta_channel_history``: one per load that replays writes), not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_loop import Iterations, create_loop_agent
from langgraph_loop.core.state import SNAPSHOT_EVERY
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread, thread


class CountingSqlite(SqliteSaver):
    """Counts the history reads (one per thread load that replays writes)."""

    loads = 0

    def get_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
        self.loads += 1
        return super().get_delta_channel_history(config=config, channels=channels)


class CountingMemory(InMemorySaver):
    """Async: counts the history reads."""

    loads = 0

    async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> Any:
        self.loads += 1
        return await super().aget_delta_channel_history(config=config, channels=channels)


def turns(n: int, rounds: int) -> list[Any]:
    """A script of ``n`` turns of ``rounds`` add-rounds each, then an answer."""
    return [reply for t in range(n) for reply in
            [*([("add", {"a": t, "b": r})] for r in range(rounds)), f"turn {t} done"]]


def test_each_new_user_message_loads_the_thread_once(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=turns(3, 2))
    with CountingSqlite.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = create_loop_agent(model, [add], checkpointer=saver)
        loads = []
        for t in range(3):
            saver.loads = 0
            out = agent.invoke({"messages": [HumanMessage(f"turn {t}")]}, thread("once"))
            loads.append(saver.loads)
            assert out["messages"][-1].content == f"turn {t} done"
        assert loads == [0, 1, 1]  # the first turn has no history to read; then the run's own load
        assert_valid_thread(out["messages"])
        assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == [
            "turn 0", "turn 1", "turn 2"]


async def test_each_new_user_message_loads_the_thread_once_async() -> None:
    model = ScriptedChatModel(script=turns(3, 2))
    saver = CountingMemory()
    agent = create_loop_agent(model, [add], checkpointer=saver)
    loads = []
    for t in range(3):
        saver.loads = 0
        out = await agent.ainvoke({"messages": [("user", f"turn {t}")]}, thread("once-async"))
        loads.append(saver.loads)
    assert loads == [0, 1, 1]
    assert out["messages"][-1].content == "turn 2 done"


def test_a_message_with_an_id_is_still_checked_against_the_stored_thread(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=turns(2, 1))
    with CountingSqlite.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = create_loop_agent(model, [add], checkpointer=saver)
        agent.invoke({"messages": [HumanMessage("go")]}, thread("ids"))
        sent = agent.get_state(thread("ids")).values["messages"][0]
        saver.loads = 0
        out = agent.invoke({"messages": [HumanMessage("go", id=sent.id)]}, thread("ids"))  # a UI's retry
        humans = [m for m in out["messages"] if isinstance(m, HumanMessage)]
        assert [m.content for m in humans] == ["go", "go"] and humans[0].id != humans[1].id
        assert out["messages"][-1].content == "turn 1 done"


def test_loading_a_long_thread_replays_at_most_a_snapshot_interval(tmp_path: Path) -> None:
    n, rounds = 12, 5  # 60 tool rounds, 144 writes, no compaction: past one snapshot interval
    model = ScriptedChatModel(script=turns(n, rounds))
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = create_loop_agent(model, [add], checkpointer=saver,
                                  iterations=Iterations(max_model_calls=rounds + 2))
        for t in range(n):
            agent.invoke({"messages": [HumanMessage(f"turn {t}")]}, thread("long"))
        state = agent.get_state(thread("long"))
        assert len(state.values["messages"]) == n * (2 * rounds + 2)
        history = saver.get_delta_channel_history(config=state.config,
                                                  channels=["messages", "call_log"])
        replayed = {name: len(h["writes"]) for name, h in history.items()}
        # a load reads the newest snapshot and the writes after it, not the thread's ~150 writes
        assert replayed["messages"] <= SNAPSHOT_EVERY, replayed
        assert replayed["call_log"] <= 10, replayed
