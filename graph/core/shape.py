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
steps, ``model -> tools``: the loop detector decides on the edge after ``model`` and its
node runs only when it acts (a warning or a stop).

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

from dataclasses import dataclass

from langgraph.graph import END

__all__ = ["UNBOUNDED_LIMIT", "Shape"]

UNBOUNDED_LIMIT = 10_000
"""The recursion limit when iterations or model calls are unbounded."""


@dataclass(frozen=True)
class Shape:
    """Which optional nodes the graph has, and everything that follows from that."""

    judge: bool = False
    approval: bool = False
    compaction: bool = False
    respond: bool = False
    final_answer: bool = True

    # --- nodes and edge targets --------------------------------------------------------------
    @property
    def entry(self) -> str:
        """The node every model call goes through first."""
        return "compaction" if self.compaction else "model"

    @property
    def iteration_end(self) -> str:
        """Where a text reply goes: the judge, or straight to the router."""
        return "judge" if self.judge else "router"

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
    @property
    def model_steps(self) -> int:
        """A model call: [compaction] model."""
        return 1 + int(self.compaction)

    @property
    def end_steps(self) -> int:
        """A text reply ends the iteration: [judge] router."""
        return 1 + int(self.judge)

    @property
    def respond_steps(self) -> int:
        """Reading a structured answer: [respond]."""
        return int(self.respond)

    def round_steps(self, *, gated: bool) -> int:
        """A tool round after the model's edge: [loop_detector] [respond] [approval] tools,
        [compaction] model (``loop_detector`` runs only when it acts; counted so a round that
        warns fits; ``respond`` when the reply also answers, or its answer did not parse)."""
        return 1 + self.respond_steps + int(gated) + 1 + self.model_steps

    @property
    def answer_steps(self) -> int:
        """Steps after ``loop_detector`` stops the run: the final answer, [respond], router."""
        return self.model_steps + 1 + self.respond_steps

    @property
    def finish_steps(self) -> int:
        """Graph steps needed after the model's edge decides, whatever it decides.

        A stop: loop_detector, then the final answer, [respond] and the router (or only the
        router without a final answer). An iteration end: [loop_detector] (it may queue the
        budget-pressure notice on a text reply), [respond] [judge] router.
        """
        stop_path = 1 + (self.model_steps + 1 if self.final_answer else 1)
        return max(stop_path, 1 + self.end_steps) + self.respond_steps

    @property
    def start_steps(self) -> int:
        """Steps a run needs at least: [compaction] model, loop_detector, [judge] router."""
        return self.model_steps + 1 + self.end_steps

    @staticmethod
    def fits(remaining: int | None, steps: int) -> bool:
        """May a node that sees ``remaining`` still schedule ``steps`` more steps?"""
        return remaining is None or remaining - 1 >= steps

    def can_continue_round(self, remaining: int | None, *, gated: bool) -> bool:
        """On the edge after ``model`` (``remaining`` as ``model`` saw it): may the tools run
        and the model be called again?"""
        return self.fits(remaining, self.round_steps(gated=gated) + self.finish_steps)

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
