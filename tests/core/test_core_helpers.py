"""The internal helpers of ``graph/core``, as their docstring examples showed them.

These were doctests; they moved here (same assertions) so that the modules' docstrings keep the
contract and one runnable example each (issue 38).
"""

from __future__ import annotations

from langchain_core.tools import StructuredTool

from langgraph_loop.core.config import ArgPolicy, LoopDetection, tool_policy


# --- core/config.py --------------------------------------------------------------------------

def test_tool_hints_add_the_read_only_tools_and_the_policies_the_metadata_declares() -> None:
    lookup = StructuredTool.from_function(
        lambda key: key, name="lookup", description="Read a record.",
        metadata={"readOnlyHint": True, "loop_key": ["key"], "loop_stop_after": 5})
    cfg = LoopDetection().with_tool_hints([lookup])
    assert (cfg.calls.read_only_tools, cfg.calls.arg_policies["lookup"].stop_after) == (("lookup",), 5)


def test_a_tools_metadata_declares_its_policy_or_none() -> None:
    assert tool_policy({"loop_key": ["path"], "loop_stop_after": 5}) == ArgPolicy(keep=("path",), stop_after=5)
    assert repr(tool_policy({"loop_key": ["path"], "loop_stop_after": 5})) == (
        "ArgPolicy(ignore=(), keep=('path',), key=None, warn_after=None, stop_after=5, polls=False)")
    assert tool_policy({"title": "Read"}) is None
