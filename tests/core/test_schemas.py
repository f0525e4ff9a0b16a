"""The compiled graph's JSON schemas build on every supported Python (issue 20, item 8).

LangGraph Server answers ``GET /assistants/{id}/schemas`` from them (Studio reads it). On
Python < 3.12 pydantic only reads ``typing_extensions.TypedDict``, so every TypedDict the
state reaches must be one (``make test-py313`` runs this module on 3.13).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from langgraph_loop import Approval, Compaction, Iterations, Judge, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel


def echo(x: str) -> str:
    """Echo."""
    return x


class Answer(BaseModel):
    """A structured answer."""

    text: str


@pytest.fixture(params=["plain", "everything"])
def agent(request: pytest.FixtureRequest) -> Any:
    if request.param == "plain":
        return create_loop_agent(ScriptedChatModel())
    return create_loop_agent(ScriptedChatModel(), [echo],
                             iterations=Iterations(judge=Judge(model=ScriptedChatModel())),
                             approval=Approval(tools=["echo"]), compaction=Compaction(max_tokens=100),
                             response_format=Answer)


def test_input_output_and_context_schemas_build(agent: Any) -> None:
    schemas = {"input": agent.get_input_jsonschema(), "output": agent.get_output_jsonschema(),
               "context": agent.get_context_jsonschema()}
    assert "messages" in schemas["input"]["properties"]
    assert {"stop_reason", "iterations", "structured_response"} <= set(schemas["output"]["properties"])
    assert set(schemas["context"]["properties"]) == {"iterations", "limits", "loop_detection"}
    loop = schemas["context"]["$defs"]["LoopDetectionOverrides"]["properties"]
    assert set(loop) == {"no_progress", "repeat", "cycle", "calls"}
    json.dumps(schemas)  # what the server sends


def test_the_state_schema_builds(agent: Any) -> None:
    """The full state (``run``, ``iteration_info``, ``call_log`` ...) LangGraph Server also reads."""
    schema = agent.get_graph().to_json()  # exercises every node's schema
    assert schema["nodes"]
    state = agent.builder.state_schema
    assert "run" in TypeAdapter(state).json_schema()["properties"]
