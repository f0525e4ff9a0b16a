"""The graph's shape: its nodes, the targets of every edge, and the step budget, all derived
from the same flags (the optional nodes and the user's middleware hooks; docs/architecture.md,
"The graph"). The loop goes on only while finishing cleanly would fit after the next round, so
``GraphRecursionError`` never escapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langgraph.graph import END

__all__ = ["UNBOUNDED_LIMIT", "Shape"]

UNBOUNDED_LIMIT = 10_000
"""The recursion limit when iterations or model calls are unbounded."""


@dataclass(frozen=True)
class Shape:
    """Which optional nodes the graph has, and everything that follows (worked out once)."""

    judge: bool = False
    approval: bool = False
    compaction: bool = False
    respond: bool = False
    final_answer: bool = True
    # the user's middleware hook nodes of each kind, in the order they run
    before_agent: tuple[str, ...] = ()
    before_model: tuple[str, ...] = ()
    after_model: tuple[str, ...] = ()
    after_agent: tuple[str, ...] = ()
    jumps: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(hook node, can_jump_to)`` for the hooks that may jump."""

    entry: str = field(init=False)
    """The node every model call goes through first."""
    start: str = field(init=False)
    """The node a run goes to after ``prepare``: the first ``before_agent`` hook, or ``entry``."""
    reply_node: str = field(init=False)
    """The node whose edge routes a reply: the last ``after_model`` hook, or ``model``."""
    exit: str = field(init=False)
    """Where a stopped run goes after the router: the ``after_agent`` hooks, or the end."""
    iteration_end: str = field(init=False)
    """Where a text reply goes: the judge, or straight to the router."""
    model_steps: int = field(init=False)
    """A model call: its hooks, [compaction] model."""
    answer_steps: int = field(init=False)
    """Steps after ``loop_detector`` stops the run: the final answer, [respond], router."""
    finish_steps: int = field(init=False)
    """Steps needed after the model's edge, whatever it decides: a stop or an iteration end."""
    start_steps: int = field(init=False)
    """Steps a run needs at least: [compaction] model, loop_detector, [judge] router."""

    def __post_init__(self) -> None:
        model_steps = len(self.before_model) + 1 + int(self.compaction) + len(self.after_model)
        router_steps = 1 + len(self.after_agent)  # the router, then the after_agent hooks
        end_steps = int(self.judge) + router_steps
        respond_steps = int(self.respond)
        stop_path = 1 + (model_steps if self.final_answer else 0) + router_steps
        finish = max(stop_path, 1 + end_steps) + respond_steps
        entry = "compaction" if self.compaction else "model"
        entry = self.before_model[0] if self.before_model else entry
        derived = {
            "entry": entry,
            "start": self.before_agent[0] if self.before_agent else entry,
            "reply_node": self.after_model[-1] if self.after_model else "model",
            "exit": self.after_agent[0] if self.after_agent else END,
            "iteration_end": "judge" if self.judge else "router",
            "model_steps": model_steps,
            "answer_steps": model_steps + respond_steps + router_steps, "finish_steps": finish,
            "start_steps": len(self.before_agent) + model_steps + 1 + end_steps,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    # --- nodes and edge targets --------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """Every node of the graph, in the order the builder adds them."""
        optional = [("judge", self.judge), ("respond", self.respond),
                    ("approval", self.approval), ("compaction", self.compaction),
                    ("middleware_end", self.middleware_end)]
        return ["prepare", "model", "loop_detector", "tools", "router",
                *(name for name, present in optional if present),
                *self.before_agent, *self.before_model, *self.after_model, *self.after_agent]

    @property
    def middleware_end(self) -> bool:
        """Is there a ``middleware_end`` node: a hook before ``after_agent`` may jump to ``"end"``."""
        return any("end" in targets for node, targets in self.jumps
                   if node not in self.after_agent)

    def jump_target(self, node: str, jump: str) -> str:
        """Where a hook node's ``jump_to`` leads (``"model"``: the ``before_model`` hooks first, as in
        ``create_agent``; ``"end"`` after ``after_agent``: the end itself)."""
        if jump == "model":
            return self.entry
        if jump == "tools":
            return "tools"
        return END if node in self.after_agent else "middleware_end"

    def _jump_targets(self, node: str) -> set[str]:
        targets = dict(self.jumps).get(node, ())
        found = {self.jump_target(node, jump) for jump in targets}
        if "tools" in targets and self.approval:
            found.add("approval")  # a jump to the tools passes the approval of gated calls
        return found

    @property
    def hook_edges(self) -> list[tuple[str, str, list[str]]]:
        """``(hook node, where it goes on, every target)`` for the hook nodes (the
        ``reply_node`` excepted: its edge is the model's). One target: a fixed edge."""
        chains = [(self.before_agent, self.entry),
                  (self.before_model, "compaction" if self.compaction else "model"),
                  (self.after_model[:-1], self.reply_node), (self.after_agent, END)]
        edges: list[tuple[str, str, list[str]]] = []
        for chain, last in chains:
            for i, node in enumerate(chain):
                default = chain[i + 1] if i + 1 < len(chain) else last
                edges.append((node, default, sorted({default} | self._jump_targets(node))))
        return edges

    @property
    def prepare_targets(self) -> list[str]:
        """After ``prepare``: into the loop, or the end when not even one call fits."""
        return [self.start, END]

    def _optional(self, targets: set[str]) -> list[str]:
        """``targets`` plus approval and respond where the graph has them, sorted."""
        targets |= {name for name, present in (("approval", self.approval),
                                               ("respond", self.respond)) if present}
        return sorted(targets)

    @property
    def model_targets(self) -> list[str]:
        """After ``model``: the loop detector, tools (or approval), respond, or the iteration's end."""
        return self._optional({"loop_detector", "tools", "router", self.iteration_end,
                               *self._jump_targets(self.reply_node)})

    @property
    def detector_targets(self) -> list[str]:
        """After ``loop_detector``: tools (or approval), respond, the final answer, or the end."""
        return self._optional({self.entry, "tools", self.iteration_end, "router"})

    @property
    def respond_targets(self) -> list[str]:
        """After ``respond``: those of ``loop_detector`` but itself (the model again: no parse)."""
        return [target for target in self.detector_targets if target != "respond"]

    @property
    def router_targets(self) -> list[str]:
        """After ``router``: the next iteration or the end (through ``after_agent``)."""
        return [self.entry, self.exit]

    @property
    def fixed_edges(self) -> list[tuple[str, str]]:
        """The unconditional edges (a stop found by ``tools`` ends via the model; with ``respond``
        the edge after ``tools`` is a route)."""
        edges = [] if self.respond else [("tools", self.entry)]
        if self.judge:
            edges.append(("judge", "router"))
        if self.approval:
            edges.append(("approval", "tools"))
        if self.compaction:
            edges.append(("compaction", "model"))
        if self.middleware_end:
            edges.append(("middleware_end", "router"))
        return edges

    # --- the step budget ---------------------------------------------------------------------
    def round_steps(self, *, gated: bool) -> int:
        """A tool round after the model's edge: [loop_detector] [respond] [approval] tools, a model
        call (``loop_detector`` and ``respond`` counted so a round that warns or answers fits)."""
        return 1 + int(self.respond) + int(gated) + 1 + self.model_steps

    @staticmethod
    def fits(remaining: int | None, steps: int) -> bool:
        """May a node that sees ``remaining`` still schedule ``steps`` more steps?"""
        return remaining is None or remaining - 1 >= steps

    def can_continue_round(self, remaining: int | None, *, gated: bool) -> bool:
        """After ``model`` (``remaining`` as it saw it): may the tools run and the model run again?"""
        return self.fits(remaining, len(self.after_model) + self.round_steps(gated=gated)
                         + self.finish_steps)

    def can_start_iteration(self, remaining: int | None) -> bool:
        """At ``router``: may another iteration start?"""
        return self.fits(remaining, self.model_steps + self.finish_steps)

    def recursion_limit(self, *, max_model_calls: int | None, max_iterations: int | None) -> int:
        """A recursion limit that fits the configured limits (10,000 when unbounded): a round per
        model call, three steps per iteration end, the finish path and ten of slack."""
        if max_model_calls is None or max_iterations is None:
            return UNBOUNDED_LIMIT
        per_iteration = max_model_calls * (self.round_steps(gated=self.approval)
                                           + len(self.after_model)) + 3
        return min(UNBOUNDED_LIMIT, max_iterations * per_iteration + self.finish_steps
                   + len(self.before_agent) + 10)
