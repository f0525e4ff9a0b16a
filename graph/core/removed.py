"""The spellings 0.4 removed (0.2's, deprecated in 0.3) and what to write instead, one table per
place a user writes them; an old spelling fails where it is written, naming its replacement.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CONTEXT", "FIELDS", "KEYWORDS", "removed_context", "removed_field", "removed_keyword"]

KEYWORDS: dict[str, str] = {
    "max_iterations": "iterations=Iterations(max=...)",
    "should_continue": "iterations=Iterations(should_continue=...)",
    "judge": "iterations=Iterations(judge=...)",
    "next_message": "iterations=Iterations(continuation=...)",
    "prompt_factory": "iterations=Iterations(continuation=lambda state, feedback: ...)",
    "record_feedback": "iterations=Iterations(record_feedback=...)",
    "inject_progress": "iterations=Iterations(inject_progress=...)",
    "fresh_context": "iterations=Iterations(fresh_context=...)",
    "stall_detection": "iterations=Iterations(stall=...)",
    "budget_pressure": "limits=Limits(budget_pressure=...)",
    "tool_filter": "hooks=Hooks(tool_filter=...)",
}
"""``create_loop_agent``'s keywords of 0.2 and what to write instead."""

CONTEXT: dict[str, str] = {
    "max_iterations": '{"iterations": {"max": ...}}',
    "max_model_calls": '{"iterations": {"max_model_calls": ...}}',
    "consecutive": '{"iterations": {"stall": {"consecutive": ...}}}',
    "tolerance": '{"iterations": {"stall": {"tolerance": ...}}}',
    "max_tool_calls": '{"limits": {"max_tool_calls": ...}}',
    "token_budget": '{"limits": {"token_budget": ...}}',
    "max_duration_s": '{"limits": {"max_duration_s": ...}}',
    "max_tool_output_chars": '{"limits": {"max_tool_output_chars": ...}}',
    "threshold": '{"limits": {"budget_pressure": {"threshold": ...}}}',
    "warn_after": '{"loop_detection": {"repeat": {"warn_after": ...}}}',
    "stop_after": '{"loop_detection": {"repeat": {"stop_after": ...}}}',
    "window": '{"loop_detection": {"calls": {"window": ...}}}',
    "no_progress_warn_after": '{"loop_detection": {"no_progress": {"warn_after": ...}}}',
    "no_progress_stop_after": '{"loop_detection": {"no_progress": {"stop_after": ...}}}',
}
"""The flat per-run context names of 0.2 and the nested spelling of each."""

FIELDS: dict[tuple[str, str], str] = {
    ("Limits", "max_model_calls"): "Iterations(max_model_calls=...)",
    ("LoopDetection", "no_progress_warn_after"): "no_progress=NoProgress(warn_after=...)",
    ("LoopDetection", "no_progress_stop_after"): "no_progress=NoProgress(stop_after=...)",
    ("LoopDetection", "no_content_after"): "no_progress=NoProgress(no_content_after=...)",
    ("LoopDetection", "call_window"): "no_progress=NoProgress(call_window=...)",
    ("LoopDetection", "path_excuse"): "no_progress=NoProgress(path_excuse=...)",
    ("LoopDetection", "block_only_interleaved"): "no_progress=NoProgress(block_only_interleaved=...)",
    ("LoopDetection", "warn_after"): "repeat=Repeat(warn_after=...) (and cycle=Cycle(warn_after=...))",
    ("LoopDetection", "stop_after"): "repeat=Repeat(stop_after=...) (and cycle=Cycle(stop_after=...))",
    ("LoopDetection", "progress_factor"): "repeat=Repeat(progress_factor=...)",
    ("LoopDetection", "same_reply_stop_after"): "same_reply=SameReply(stop_after=...)",
    ("LoopDetection", "drift_warn_after"): "drift=Drift(warn_after=...)",
    ("LoopDetection", "drift_stop_after"): "drift=Drift(stop_after=...)",
    ("LoopDetection", "block"): "no_progress=NoProgress(block=...), repeat=Repeat(block=...), "
                                "calls=Calls(block_per_tool=...)",
    ("LoopDetection", "window"): "calls=Calls(window=...)",
    ("LoopDetection", "normalize_results"): "calls=Calls(normalize_results=...)",
    ("LoopDetection", "arg_policies"): "calls=Calls(arg_policies=...)",
    ("LoopDetection", "read_only_tools"): "calls=Calls(read_only_tools=...)",
    ("LoopDetection", "per_tool"): "calls=Calls(per_tool=...)",
}
"""Configuration fields that 0.4 moved, by (model, field)."""


def removed_keyword(names: Iterable[str]) -> TypeError:
    """The error for keywords ``create_loop_agent`` does not take (a removed one names its replacement)."""
    names = sorted(names)
    lines = [f"create_loop_agent({n}=...) was removed in 0.4: use {KEYWORDS[n]}"
             for n in names if n in KEYWORDS]
    if {"next_message", "prompt_factory"} <= set(names):  # 0.2 ran one of them: say it, drop none
        lines.append("next_message and prompt_factory both become the one continuation: write "
                     "one callback (state, feedback) -> str | None that does what both did")
    unknown = [n for n in names if n not in KEYWORDS]
    if unknown:
        lines.append(f"create_loop_agent: unknown arguments {unknown}")
    return TypeError("; ".join(lines))


def removed_context(name: str) -> str:
    """The message for a flat per-run context name of 0.2."""
    return f"invalid run context: {name!r} was removed in 0.4: use {CONTEXT[name]}"


def removed_field(model: str, name: str) -> str | None:
    """What replaces ``model``'s removed field ``name`` (None: it was never a field)."""
    moved = FIELDS.get((model, name))
    return None if moved is None else f"{model}({name}=...) was removed in 0.4: use {moved}"
