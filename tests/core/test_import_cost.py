"""What ``import langgraph_loop`` loads (issue 42): no provider SDK until the app uses one.

Run in a fresh interpreter, as an app, a CLI call or a forked worker starts: importing the package
and running an agent on a model of another provider leaves ``langchain_openai`` and the ``openai``
SDK (and Anthropic's) unloaded; an OpenAI model, once the app makes one, still gets
``ProviderStrategy``'s ``strict`` tools as under ``create_agent``.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROVIDERS = ("langchain_openai", "openai", "langchain_anthropic", "anthropic")


def loaded_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; the provider modules loaded then and what it printed."""
    script = (f"import sys, json\n{code}\n"
              f"print(json.dumps({{'loaded': [m for m in {PROVIDERS!r} if m in sys.modules]}}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    *printed, last = done.stdout.strip().splitlines()
    return {**json.loads(last), "printed": printed}


def test_importing_the_package_loads_no_provider_sdk() -> None:
    assert loaded_after("import langgraph_loop")["loaded"] == []


def test_a_run_on_another_providers_model_loads_no_provider_sdk() -> None:
    out = loaded_after(
        "from langchain_core.messages import HumanMessage\n"
        "from langgraph_loop import create_loop_agent\n"
        "from langgraph_loop.scripted import ScriptedChatModel\n"
        "model = ScriptedChatModel(script=[[('add', {'a': 1, 'b': 2})], 'three'])\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "out = create_loop_agent(model, [add]).invoke({'messages': [HumanMessage('1+2?')]})\n"
        "print(out['stop_reason'], out['messages'][-1].content)")
    assert out == {"loaded": [], "printed": ["completed three"]}


def test_an_openai_model_made_by_the_app_still_gets_strict_tools() -> None:
    out = loaded_after(
        "from langchain.agents.structured_output import ProviderStrategy\n"
        "from pydantic import BaseModel\n"
        "from langgraph_loop.core.settings import LoopSettings\n"
        "from langgraph_loop.nodes.binding import call_model\n"
        "from langchain_openai import ChatOpenAI  # after the package: the app's own import\n"
        "class Answer(BaseModel):\n"
        "    text: str\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "settings = LoopSettings.build(ChatOpenAI(model='m', api_key='k'), [add],\n"
        "                              response_format=ProviderStrategy(Answer))\n"
        "print(call_model(settings).kwargs['tools'][0]['function']['strict'])")
    assert out["printed"] == ["True"] and "openai" in out["loaded"]
