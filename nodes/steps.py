"""Graph steps: how many steps each path through the built graph takes (the one place).

LangGraph's recursion limit is handled with ``RemainingSteps``: a node that sees
``remaining`` may still schedule ``remaining - 1`` steps. The loop continues only
while the steps to finish cleanly (answer pending calls, final answer, router) would
still fit after the next round, so ``GraphRecursionError`` never escapes. A clean tool
round is two steps, ``model -> tools``: the loop detector decides on the edge after
``model`` and its node runs only when it acts (a warning or a stop). The counts follow
the nodes the settings add: ``compaction`` before every model call, ``approval``
before gated tools, ``judge`` before the router, ``respond`` at the end.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> s = LoopSettings.build(ScriptedChatModel())
    >>> finish_steps(s), can_continue_round(7, s, gated=False), can_continue_round(6, s, gated=False)
    (3, True, False)
    >>> default_recursion_limit(s)
    793
"""

from __future__ import annotations

from langgraph_loop.core.settings import LoopSettings

__all__ = ["answer_steps", "can_continue_round", "can_start_pass", "default_recursion_limit",
           "finish_steps", "fits", "start_steps"]

UNBOUNDED_LIMIT = 10_000
"""The recursion limit when passes or model calls are unbounded."""


def _model_steps(settings: LoopSettings) -> int:
    """A model call: [compaction] model."""
    return 1 + (1 if settings.compaction is not None else 0)


def _pass_end_steps(settings: LoopSettings) -> int:
    """A text reply ends the pass: [judge] router."""
    return 1 + (1 if settings.judge is not None else 0)


def _respond_steps(settings: LoopSettings) -> int:
    """The structured final turn: [respond]."""
    return 1 if settings.response_format is not None else 0


def _round_steps(settings: LoopSettings, *, gated: bool) -> int:
    """A tool round after the model's edge: [loop_detector] [approval] tools, [compaction] model.

    ``loop_detector`` runs only when it acts (a warning); it is counted so a round that
    warns fits too.
    """
    return 1 + (1 if gated else 0) + 1 + _model_steps(settings)


def answer_steps(settings: LoopSettings) -> int:
    """Steps after ``loop_detector`` stops the run: [compaction] model (final answer), router,
    [respond]."""
    return _model_steps(settings) + 1 + _respond_steps(settings)


def finish_steps(settings: LoopSettings) -> int:
    """Graph steps needed after the model's edge decides, whatever it decides.

    A stop: loop_detector, then the final answer and the router (or only the router
    without a final answer). A pass end: [loop_detector] (it may queue the budget-pressure
    notice on a text reply), [judge] router. Then [respond].
    """
    stop_path = 1 + (_model_steps(settings) + 1 if settings.limits.final_answer else 1)
    return max(stop_path, 1 + _pass_end_steps(settings)) + _respond_steps(settings)


def fits(remaining: int | None, steps: int) -> bool:
    """May a node that sees ``remaining`` still schedule ``steps`` more steps?"""
    return remaining is None or remaining - 1 >= steps


def start_steps(settings: LoopSettings) -> int:
    """Steps a run needs at least: [compaction] model, loop_detector, [judge] router."""
    return _model_steps(settings) + 1 + _pass_end_steps(settings)


def can_continue_round(remaining: int | None, settings: LoopSettings, *, gated: bool) -> bool:
    """On the edge after ``model`` (``remaining`` as ``model`` saw it): may the tools run and
    the model be called again?"""
    return fits(remaining, _round_steps(settings, gated=gated) + finish_steps(settings))


def can_start_pass(remaining: int | None, settings: LoopSettings) -> bool:
    """At ``router``: may another pass start?"""
    return fits(remaining, _model_steps(settings) + finish_steps(settings))


def default_recursion_limit(settings: LoopSettings) -> int:
    """A recursion limit that fits the configured limits (10,000 when unbounded).

    Every model call of a pass may start a round (counted with its possible
    ``loop_detector`` step), every pass ends with up to three steps, and the run with
    the finish path plus ten of slack.
    """
    calls, passes = settings.limits.max_model_calls, settings.max_iterations
    if calls is None or passes is None:
        return UNBOUNDED_LIMIT
    per_round = _round_steps(settings, gated=settings.approval is not None)
    per_pass = calls * per_round + 3
    return min(UNBOUNDED_LIMIT, passes * per_pass + finish_steps(settings) + 10)
