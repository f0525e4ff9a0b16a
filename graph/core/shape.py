"""The graph's shape: its nodes, the targets of every edge, and the step budget, all derived
from the same configuration flags (the one place they are written down).

The flags: ``judge`` (a judge node before the router), ``approval`` (before gated tools),
``compaction`` (before every model call), ``respond`` (reads the structured answer of a reply
when ``response_format`` is set),
``final_answer`` (a tools-free last call after a stop). ``graph/builder.py`` wires the
graph from a ``Shape``; the routes return its node names; the nodes ask it whether the
steps to finish cleanly still fit.

LangGraph's recursion limit is handled with ``RemainingSteps``: a node that sees
``remaining`` may still schedule ``remaining - 1`` steps. The loop continues only while
the steps to finish cleanly (answer pending calls, final answer, router) would still fit
after the next round, so ``GraphRecursionError`` never escapes. A clean tool round is two
steps, ``model -> tools``: the engine decides in ``model`` and the ``loop_detector`` node
runs only when the decision acts (a warning, a block or a stop).

Example:
    >>> shape = Shape()
    >>> shape.entry, shape.iteration_end, shape.finish_steps
    ('model', 'router', 3)
    >>> shape.can_continue_round(7, gated=False), shape.can_continue_round(6, gated=False)
    (True, False)
    >>> shape.recursion_limit(max_model_calls=25, max_iterations=10)
    793
    >>> Shape(judge=True, approval=True).model_targets
    ['approval', 'judge', 'loop_detector', 'router', 'tools']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langgraph.graph import END

__all__ = ["UNBOUNDED_LIMIT", "Shape"]

UNBOUNDED_LIMIT = 10_000
"""The recursion limit when iterations or model calls are unbounded."""


@dataclass(frozen=True)
class Shape:
    """Which optional nodes the graph has, and everything that follows from that.

    The step counts a run reads on every round are worked out once, when the shape is made.
    """

    judge: bool = False
    approval: bool = False
    compaction: bool = False
    respond: bool = False
    final_answer: bool = True

    entry: str = field(init=False)
    """The node every model call goes through first."""
    iteration_end: str = field(init=False)
    """Where a text reply goes: the judge, or straight to the router."""
    model_steps: int = field(init=False)
    """A model call: [compaction] model."""
    end_steps: int = field(init=False)
    """A text reply ends the iteration: [judge] router."""
    respond_steps: int = field(init=False)
    """Reading a structured answer: [respond]."""
    answer_steps: int = field(init=False)
    """Steps after ``loop_detector`` stops the run: the final answer, [respond], router."""
    finish_steps: int = field(init=False)
    """Graph steps needed after the model's edge decides, whatever it decides.

    A stop: loop_detector, then the final answer, [respond] and the router (or only the
    router without a final answer). An iteration end: [loop_detector] (it may queue the
    budget-pressure notice on a text reply), [respond] [judge] router.
    """
    start_steps: int = field(init=False)
    """Steps a run needs at least: [compaction] model, loop_detector, [judge] router."""
    _round_needs: tuple[int, int] = field(init=False, repr=False)
    """Steps a tool round and the finish after it need: (not gated, gated)."""

    def __post_init__(self) -> None:
        model_steps = 1 + int(self.compaction)
        end_steps = 1 + int(self.judge)
        respond_steps = int(self.respond)
        stop_path = 1 + (model_steps + 1 if self.final_answer else 1)
        finish = max(stop_path, 1 + end_steps) + respond_steps
        derived = {
            "entry": "compaction" if self.compaction else "model",
            "iteration_end": "judge" if self.judge else "router",
            "model_steps": model_steps, "end_steps": end_steps, "respond_steps": respond_steps,
            "answer_steps": model_steps + 1 + respond_steps, "finish_steps": finish,
            "start_steps": model_steps + 1 + end_steps,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_round_needs", (self.round_steps(gated=False) + finish,
                                                  self.round_steps(gated=True) + finish))

    # --- nodes and edge targets --------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """Every node of the graph, in the order the builder adds them."""
        optional = [("judge", self.judge), ("respond", self.respond),
                    ("approval", self.approval), ("compaction", self.compaction)]
        return ["prepare", "model", "loop_detector", "tools", "router",
                *(name for name, present in optional if present)]

    @property
    def prepare_targets(self) -> list[str]:
        """After ``prepare``: into the loop, or the end when not even one call fits."""
        return [self.entry, END]

    def _optional(self, targets: set[str]) -> list[str]:
        """``targets`` plus approval and respond where the graph has them, sorted."""
        targets |= {name for name, present in (("approval", self.approval),
                                               ("respond", self.respond)) if present}
        return sorted(targets)

    @property
    def model_targets(self) -> list[str]:
        """After ``model``: the loop detector's node when it acts, else tools (or approval),
        the structured answer, or the iteration's end."""
        return self._optional({"loop_detector", "tools", "router", self.iteration_end})

    @property
    def detector_targets(self) -> list[str]:
        """After ``loop_detector``: tools (or approval), the structured answer, the final
        answer, or the end."""
        return self._optional({self.entry, "tools", self.iteration_end, "router"})

    @property
    def respond_targets(self) -> list[str]:
        """After ``respond``: the reply's other calls, the model again (the answer did not
        parse), the iteration's end, or the router after a stop."""
        targets = {self.entry, "tools", self.iteration_end, "router"}
        if self.approval:
            targets.add("approval")
        return sorted(targets)

    @property
    def router_targets(self) -> list[str]:
        """After ``router``: the next iteration or the end."""
        return [self.entry, END]

    @property
    def fixed_edges(self) -> list[tuple[str, str]]:
        """The unconditional edges (a stop found by ``tools`` ends via the model)."""
        edges = [("tools", self.entry)]
        if self.judge:
            edges.append(("judge", "router"))
        if self.approval:
            edges.append(("approval", "tools"))
        if self.compaction:
            edges.append(("compaction", "model"))
        return edges

    # --- the step budget ---------------------------------------------------------------------
    def round_steps(self, *, gated: bool) -> int:
        """A tool round after the model's edge: [loop_detector] [respond] [approval] tools,
        [compaction] model (``loop_detector`` runs only when it acts; counted so a round that
        warns fits; ``respond`` when the reply also answers, or its answer did not parse)."""
        return 1 + self.respond_steps + int(gated) + 1 + self.model_steps

    @staticmethod
    def fits(remaining: int | None, steps: int) -> bool:
        """May a node that sees ``remaining`` still schedule ``steps`` more steps?"""
        return remaining is None or remaining - 1 >= steps

    def can_continue_round(self, remaining: int | None, *, gated: bool) -> bool:
        """On the edge after ``model`` (``remaining`` as ``model`` saw it): may the tools run
        and the model be called again?"""
        return remaining is None or remaining - 1 >= self._round_needs[gated]

    def can_start_iteration(self, remaining: int | None) -> bool:
        """At ``router``: may another iteration start?"""
        return self.fits(remaining, self.model_steps + self.finish_steps)

    def recursion_limit(self, *, max_model_calls: int | None, max_iterations: int | None) -> int:
        """A recursion limit that fits the configured limits (10,000 when unbounded).

        Every model call of an iteration may start a round (counted with its possible
        ``loop_detector`` step), every iteration ends with up to three steps, and the run
        with the finish path plus ten of slack.
        """
        if max_model_calls is None or max_iterations is None:
            return UNBOUNDED_LIMIT
        per_iteration = max_model_calls * self.round_steps(gated=self.approval) + 3
        return min(UNBOUNDED_LIMIT, max_iterations * per_iteration + self.finish_steps + 10)
