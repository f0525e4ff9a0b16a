"""Issue 21, provider errors: retries follow the exception's own retryability (as
langchain-core and the provider SDK classify it). A 4xx other than 408/409/429 is raised at
once, with the thread left resumable; 429 (and 5xx) are still retried.

Through ``langchain-openai`` against the loopback OpenAI server, with the client's own
retries off (``max_retries=0``) so every request the server counts is the loop's.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_loop import create_loop_agent
from tests.faults.support import thread
from tests.support.openai_server import OpenAIServer, error, text


def _agent(server: OpenAIServer) -> Any:
    llm = ChatOpenAI(base_url=server.base_url, api_key=SecretStr("x"), model="m", max_retries=0)
    return create_loop_agent(llm, checkpointer=InMemorySaver())


@pytest.mark.parametrize(("status", "raised"), [(400, openai.BadRequestError),
                                                (401, openai.AuthenticationError)])
def test_a_request_the_provider_refuses_is_raised_at_once_and_the_thread_resumes(
        openai_server: OpenAIServer, status: int, raised: type[Exception]) -> None:
    """Error at once (no retry, no back-off sleep): resending the same request cannot
    succeed, and the openai SDK itself does not retry these. Today it is sent 3 times with
    0.5 s and 1 s sleeps between. The thread stays paused before ``model``, so once the cause
    is fixed ``invoke(None)`` finishes the run."""
    fixed = [False]  # the provider refuses until the caller fixes the cause
    openai_server.default = lambda _body: text("Hello!") if fixed[0] else error(status, "refused")
    agent = _agent(openai_server)
    with pytest.raises(raised):
        agent.invoke({"messages": [HumanMessage("hi")]}, thread("refused"))
    sent = len(openai_server.requests)
    assert sent == 1, f"the refused request was sent {sent} times"
    fixed[0] = True
    paused = agent.get_state(thread("refused"))
    assert paused.next == ("model",)
    assert [m.content for m in paused.values["messages"]] == ["hi"]
    result = agent.invoke(None, thread("refused"))
    assert result["stop_reason"] == "completed" and result["messages"][-1].content == "Hello!"
    assert len(openai_server.requests) == 2


def test_a_rate_limit_is_still_retried(openai_server: OpenAIServer) -> None:
    """Guard for the fix (passes today): 429 is retryable, so the run retries and
    completes without the caller seeing it."""
    openai_server.script += [error(429, "slow down"), text("Hello!")]
    result = _agent(openai_server).invoke({"messages": [HumanMessage("hi")]}, thread("limited"))
    assert result["stop_reason"] == "completed" and result["messages"][-1].content == "Hello!"
    assert len(openai_server.requests) == 2
