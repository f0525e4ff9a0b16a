"""The ``judge`` node: at a natural pass end, ask the predicate, then a second model.

Order: on the capped pass nothing is asked (the router stops with
``max_iterations``). The predicate is asked first and its answer is stored in
``pass_info["predicate"]`` for the router; if it asks to continue, the judge model
is not called. Otherwise the judge model sees its instructions (criteria filled
in), the run's original request (content kept as sent, images included) and the
latest answer, and returns a ``JudgeVerdict`` through ``with_structured_output``
(text fallback: ``VERDICT: DONE`` / ``VERDICT: MORE``). Judge calls run with
``tags=["judge"]`` and ``run_name="judge"`` so streaming UIs can hide them; their
usage goes to ``judge_usage``. A failed call is retried once as a plain text call
(which also covers models whose structured mode fails); a second failure counts as
"not answered", with the error in the verdict (and so in the pass record).

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> from langgraph_loop.core.config import Judge
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> state = {"messages": [HumanMessage("2+2?", id="r"), AIMessage("4")],
    ...          "run": {"request_id": "r"}}
    >>> [m.type for m in judge_request(state, Judge(model=ScriptedChatModel()))]
    ['system', 'human', 'human', 'human']
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from langgraph_loop.core.config import Judge, JudgeVerdict
from langgraph_loop.core.effects import Call, Invoke, Logic, StructuredReply, as_message, as_structured
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState, Usage, add_usage, new_usage, usage_of
from langgraph_loop.nodes.base import LoopNode
from langgraph_loop.nodes.passes import answer_text, last_ai
from langgraph_loop.nodes.router import normalize_predicate
from langgraph_loop.nodes.verdict import judge_instructions, parse_text_verdict, resolve_verdict

__all__ = ["JUDGE_TAG", "JudgeNode", "judge_config", "judge_request", "original_request"]

JUDGE_TAG = "judge"
INTRO = "Evaluate the agent's work. The user's original request follows:"
QUESTION = "Has the original request been fully addressed?"


def judge_config(config: RunnableConfig | None) -> RunnableConfig:
    """The node's config with the judge's tag and run name."""
    return merge_configs(config, {"tags": [JUDGE_TAG], "run_name": JUDGE_TAG})


def original_request(state: LoopState) -> BaseMessage | None:
    """The message that started this run (the first human message as a fallback)."""
    messages = state.get("messages") or []
    request_id = (state.get("run") or {}).get("request_id")
    for message in messages:
        if request_id is not None and message.id == request_id:
            return message
    return next((m for m in messages if isinstance(m, HumanMessage)), None)


def judge_request(state: LoopState, judge: Judge) -> list[BaseMessage]:
    """System instructions, the original request (content verbatim), the latest answer."""
    request = original_request(state)
    answer = answer_text(last_ai(state.get("messages") or []))
    out: list[BaseMessage] = [SystemMessage(judge_instructions(judge.instructions, judge.criteria)),
                              HumanMessage(INTRO)]
    if request is not None:
        out.append(HumanMessage(request.content))  # type: ignore[arg-type]
    out.append(HumanMessage(f"The agent's latest response was:\n\n{answer}\n\n{QUESTION}"))
    return out


def _structured(model: Any) -> Runnable[LanguageModelInput, Any] | None:
    try:
        return model.with_structured_output(JudgeVerdict, include_raw=True)  # type: ignore[no-any-return]
    except NotImplementedError:
        return None


class JudgeNode(LoopNode):
    """Ask the predicate, then the judge model (see module docstring)."""

    name = "judge"

    def __init__(self, settings: LoopSettings) -> None:
        super().__init__(settings)
        judge = settings.judge
        self._structured = _structured(judge.model) if judge is not None else None

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        judge = settings.judge
        iteration = state.get("iteration", 1)
        capped = settings.max_iterations is not None and iteration >= settings.max_iterations
        if judge is None or capped or state.get("stop_reason") is not None:
            return {}
        pass_info: dict[str, Any] = dict(state.get("pass_info") or {})
        if settings.should_continue is not None:
            result = yield Call(settings.should_continue, (state,), name="should_continue")
            go, feedback = normalize_predicate(result)
            pass_info["predicate"] = {"continue": go, "feedback": feedback}
            if go:
                return {"pass_info": pass_info}
        verdict, usage = yield from self._ask(judge, judge_request(state, judge), config)
        return {"pass_info": pass_info, "verdict": verdict,
                "judge_usage": add_usage(state.get("judge_usage"), usage)}

    def _ask(self, judge: Judge, request: list[BaseMessage], config: RunnableConfig) -> Logic:
        """Structured first; on an error, one plain-text retry; then "not answered"."""
        usage: Usage = new_usage()
        errors: list[str] = []
        for attempt in range(2):
            structured = attempt == 0 and self._structured is not None
            runnable = self._structured if structured else judge.model
            try:
                result = yield Invoke(runnable, request, judge_config(config))  # type: ignore[arg-type]
                reply = (as_structured(result, "judge") if structured else
                         StructuredReply(raw=as_message(result, "judge"), parsed=None,
                                         parsing_error=None))
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - a judge failure is "not answered"
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            raw = reply["raw"]
            usage = add_usage(usage, usage_of(raw))
            text = answer_text(raw)
            if not structured:
                return parse_text_verdict(text), usage
            args = [c.get("args") for c in raw.tool_calls]
            return resolve_verdict(reply["parsed"], args, text), usage
        return {"answered": False, "reasoning": "", "error": "; ".join(errors)}, usage
