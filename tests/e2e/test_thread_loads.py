"""Loading a thread after compaction is cheap (issue 31.4): the compaction's checkpoint holds the
compacted messages (and the run's call log) whole, so ``get_state`` on SQLite replays only what
came after it, not every message the summary replaced."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_loop import Compaction, Iterations, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, thread

ROUNDS = 40


def test_get_state_after_compaction_replays_only_what_came_after_it(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": i, "b": 1})] for i in range(ROUNDS)] + ["done"])
    agent_kw = {"iterations": Iterations(max_model_calls=ROUNDS + 5), "loop_detection": None,
                "compaction": Compaction(max_tokens=400, keep_last=4,
                                         summarizer=ScriptedChatModel(default="the sums so far"))}
    config = {**thread("loads"), "recursion_limit": 10 * ROUNDS}
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = create_loop_agent(model, [add], checkpointer=saver, **agent_kw)  # type: ignore[arg-type]
        agent.invoke({"messages": [HumanMessage("add them " + "please " * 20)]}, config)
        state = agent.get_state(config)
        assert state.values["iterations"][0]["compacted"] > ROUNDS  # compacted many times
        history = saver.get_delta_channel_history(config=state.config,
                                                  channels=["messages", "call_log"])
        replayed = {name: len(h["writes"]) for name, h in history.items()}
        # what a load replays: the writes since the last compaction, a few rounds' worth
        assert replayed["messages"] <= 12, replayed
        assert replayed["call_log"] <= 12, replayed
        assert [m.content for m in state.values["messages"]][-1] == "done"
        fresh = create_loop_agent(model, [add], checkpointer=saver, **agent_kw)  # type: ignore[arg-type]
        assert fresh.get_state(config).values["messages"] == state.values["messages"]
