"""Every fixed text the model sees, in one place (loop-detector findings format their own);
templates use ``str.format`` fields, which the nodes fill in.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BUDGET_PRESSURE", "CANCELLED", "CONTINUE", "CRITERIA", "CUT_REPLY", "EDIT_NOTE", "FEEDBACK",
           "INVALID_JSON", "JUDGE_INSTRUCTIONS", "JUDGE_INTRO", "JUDGE_MARKERS", "JUDGE_QUESTION",
           "JUDGE_RESPONSE", "LOOP_HINT", "LOOP_STOP_INSTRUCTION", "NEEDS_APPROVAL", "NOT_OFFERED",
           "NO_ANSWER", "NO_FINAL_ANSWER", "OUTPUT_TRUNCATED", "PERSON_SAID", "PROGRESS", "REJECTED",
           "REJECTED_NO_MESSAGE", "REJECTED_WITH_MESSAGE", "STOPPED_BY_PERSON", "STOP_ANSWER",
           "STOP_INSTRUCTION", "STRUCTURED_ERROR", "STRUCTURED_RETURNED", "SUMMARY", "SUMMARY_INSTRUCTIONS",
           "SUMMARY_REQUEST", "TODOS_OPEN", "TOOL_LIMIT", "TOOL_RAISED", "TYPED_INSTEAD", "UNKNOWN_TOOL",
           "criteria_list"]

# --- stops (``core/stop.py`` fills in why) -------------------------------------------------
STOP_ANSWER = "Error: not executed: the run was stopped because {why}."  # a call a stop left unanswered
STOP_INSTRUCTION = ("The run has been stopped because {why}. Tools are no longer available. "
                    "Tell the user, in your own words, why you stopped; then summarize what you "
                    "have done so far and give your best final answer now.")
"""The notice the tools-free final-answer call sees."""
LOOP_STOP_INSTRUCTION = ("The run has been stopped because {why}. Tools are no longer available. "
                         "Tell the user, in your own words, that you stopped because you were "
                         "repeating yourself; then summarize what you have done so far and give "
                         "your best final answer now.")
"""The notice the final-answer call sees after a loop stop."""
STOPPED_BY_PERSON = "a person supervising this run chose to stop it ({why})"
"""Why a stop happened when a person chose it at a question (a loop, the token budget)."""
PERSON_SAID = "They said: {message}"  # a person's reason for a stop they chose, after the stop notice
TYPED_INSTEAD = ("Error: not executed: the run paused to ask the user whether to go on with this "
                 "call (it looked like a loop), and the user wrote a new message instead of "
                 "answering.")
"""The answer to a call paused at the loop question when the person typed instead."""
CANCELLED = "Error: this call was not executed: the run that requested it ended first."
"""The error result of a call left unanswered by an abandoned run (``prepare`` repairs it)."""

LOOP_HINT = "A person supervising this run read the loop you were in and says: {hint}"
"""A human's hint about a loop stop (``LoopDetection.ask_human``), delivered as a notice."""
NO_FINAL_ANSWER = ("(No answer: the run stopped ({reason}) and the last reply asked for tools "
                   "again instead of answering: {calls}.)")
"""The final answer when the tools-free call after a stop still only asked for tools (not run)."""
CUT_REPLY = "(This reply was cut off: it kept repeating the same text.)"
"""A cut reply's text when none of it can be sent (it looped in its reasoning): a reply may not be empty."""

# --- continuation and progress ---------------------------------------------------------------
CONTINUE = "Continue working on the task. If it is complete, say so."
"""The default message that starts the next iteration."""
FEEDBACK = "Feedback on your last answer: {feedback}\n\n{text}"
"""Feedback (from the predicate or the judge) put before a continuation text."""
PROGRESS = "Progress so far:\n{lines}"  # numbered lines, before a continuation or in fresh context
CRITERIA = "Your answer will be checked against these criteria:\n{criteria}"
"""The judge's criteria as the agent's system prompt states them."""

TODOS_OPEN = ("You still have {count} open todo item(s) that must be addressed before you can "
              "finish:\n{lines}\nKeep working on them, mark each one completed with write_todos as "
              "soon as it is done, and stop only when all are completed.")
"""``todos_remaining_message``'s text (the open items as ``- [status] content`` lines)."""

# --- budget pressure -----------------------------------------------------------------------
BUDGET_PRESSURE = (
    "You are close to this run's token budget. Stop exploring and do not start new work: "
    "make only the tool calls you still need, then give your final answer now."
)
"""``BudgetPressure.instruction``'s default."""

# --- tool results the loop writes ------------------------------------------------------------
UNKNOWN_TOOL = "Error: unknown tool {name}. Available tools: {available}."
NOT_OFFERED = "Error: tool {name} is not available at this point of the task; it was not run."
TOOL_LIMIT = "Error: tool call limit for this run reached; this call was not run."
TOOL_RAISED = "Error: the tool raised {kind}: {error}"
NO_ANSWER = "Error: the tool returned no result for this call (its result answered another call)."
INVALID_JSON = ("Error: the arguments of this call to {name} are not valid JSON ({error}); "
                "it was not run.")
OUTPUT_TRUNCATED = "\n\n[output truncated: {length} characters, the first {limit} are shown]"

# --- approval --------------------------------------------------------------------------------
NEEDS_APPROVAL = "Error: tool {name} needs approval and no decision was recorded; it was not run."
REJECTED = "Rejected by a reviewer: the call to {name} was not run."
REJECTED_WITH_MESSAGE = "{base} Reviewer's message: {message}"
REJECTED_NO_MESSAGE = "{base} Do not retry this call unless the user asks for it."
EDIT_NOTE = ("Note: a reviewer changed this call before it ran. You asked for {asked}; "
             "what ran was {ran}.")

# --- compaction ------------------------------------------------------------------------------
SUMMARY_INSTRUCTIONS = (
    "You compress the history of an agent's work so it can continue with less context. "
    "Summarize the conversation below: the facts found, the tool results that matter, "
    "decisions made, what was tried and failed, and what remains to do. Keep names, "
    "numbers, paths and identifiers exactly. Write only the summary."
)
SUMMARY_REQUEST = "Conversation to summarize:\n\n{transcript}"
SUMMARY = "Summary of the earlier conversation ({replaced} messages were compacted):\n\n{text}"

# --- the structured answer (``response_format``; the texts ``create_agent`` uses) ----------------
STRUCTURED_RETURNED = "Returning structured response: {response}"
"""The result of an output-tool call that parsed (``ToolStrategy`` without ``tool_message_content``)."""
STRUCTURED_ERROR = "Error: {error}\n Please fix your mistakes."
"""The result of an output-tool call that did not parse (``handle_errors=True`` or an error type)."""

# --- the judge -------------------------------------------------------------------------------
JUDGE_MARKERS = (
    'If you cannot return the structured verdict, end your reply with a line reading exactly '
    '"VERDICT: DONE" when the request is fully addressed, or "VERDICT: MORE" when it is not.'
)
JUDGE_INSTRUCTIONS = (
    "You are an evaluator. You are given a user's original request and an AI agent's latest "
    "response. Decide whether the response fully addresses the original request. Set "
    "`answered` to true only if it does, and use `reasoning` to justify your decision briefly; "
    "when it does not, say what is still missing or wrong, so the agent can fix it. "
    + JUDGE_MARKERS + "{criteria}"
)
JUDGE_INTRO = "Evaluate the agent's work. The user's original request follows:"
JUDGE_QUESTION = "Has the original request been fully addressed?"
JUDGE_RESPONSE = "The agent's latest response was:\n\n{answer}\n\n{question}"


def criteria_list(criteria: Sequence[str]) -> str:
    """The judge's criteria as a bullet list (the judge and the agent see the same list)."""
    return "\n".join(f"- {c}" for c in criteria)
