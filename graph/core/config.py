"""Configuration models: keyword-only, validated, immutable. Every model raises ``ValueError``
(pydantic's ``ValidationError`` is one) naming the field when a value or a combination is invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, model_validator

from langgraph_loop.core import prompts
from langgraph_loop.core.removed import removed_field

__all__ = ["DEFAULT_LAYERS", "LAYERS", "Approval", "ArgPolicy", "BudgetPressure", "Calls", "Compaction",
           "Cycle", "Drift", "Hooks", "Iterations", "Judge", "JudgeVerdict", "Limits", "LoopDetection",
           "NoProgress", "Repeat", "SameReply", "StallDetection"]


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """A misspelled field names the model's real ones (``Limits(final_answr=...)``)."""
        if isinstance(data, Mapping):
            unknown = [str(k) for k in data if k not in cls.model_fields]
            moved = [m for k in unknown if (m := removed_field(cls.__name__, k)) is not None]
            if moved:
                raise ValueError("; ".join(moved))
            if unknown:
                fields = ", ".join(cls.model_fields)
                raise ValueError(f"{', '.join(unknown)}: unknown field (fields of {cls.__name__}: "
                                 f"{fields})")
        return data


class _Ladder(_Config):
    """A layer's settings with ``warn_after`` before ``stop_after``."""

    warn_after: int
    stop_after: int

    @model_validator(mode="after")
    def _ordered(self) -> _Ladder:
        if self.stop_after <= self.warn_after:
            raise ValueError(f"{type(self).__name__}: stop_after must be greater than warn_after")
        return self


LAYERS: tuple[str, ...] = ("no_progress", "drift", "cycle", "repeat", "same_reply", "per_tool", "text")
"""Every detection layer, in the order their findings are ranked."""
DEFAULT_LAYERS: tuple[str, ...] = ("no_progress", "same_reply", "per_tool", "text")
"""The layers on by default (why the others are opt-in: docs/loop-detection.md)."""

OPT_IN: tuple[str, ...] = ("repeat", "cycle", "drift")
"""The opt-in layers with settings of their own: giving them switches the layer on."""

BLOCKABLE: tuple[str, ...] = ("no_progress", "repeat", "per_tool")
"""The layers whose stop rung may be preceded by a block (their findings name calls)."""


class ArgPolicy(_Config):
    """What makes two calls of one tool "the same" (one of ``ignore``, ``keep``, ``key``), its own
    ``NoProgress`` thresholds, and ``polls`` (docs/loop-detection.md, "What counts as "the same
    call", per tool"; a tool's metadata may declare the same)."""

    ignore: tuple[str, ...] = ()
    keep: tuple[str, ...] | None = None
    key: Callable[[dict[str, Any]], Any] | None = None
    warn_after: int | None = Field(default=None, ge=1)
    stop_after: int | None = Field(default=None, ge=2)
    polls: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> ArgPolicy:
        if sum((bool(self.ignore), self.keep is not None, self.key is not None)) > 1:
            raise ValueError("ArgPolicy: give one of ignore, keep or key")
        if (self.warn_after is not None and self.stop_after is not None
                and self.stop_after <= self.warn_after):
            raise ValueError("ArgPolicy: stop_after must be greater than warn_after")
        return self


class NoProgress(_Ladder):
    """The ``no_progress`` layer: a call asked for again after its own identical results."""

    warn_after: int = Field(default=2, ge=1)
    stop_after: int = Field(default=3, ge=2)
    no_content_after: int = Field(default=4, ge=1)
    call_window: int = Field(default=30, ge=2, le=10_000)
    path_excuse: bool = True
    block: bool = True
    block_only_interleaved: bool = True


class Repeat(_Ladder):
    """The ``repeat`` layer (opt-in): one call in many responses of the window; ``progress_factor``
    multiplies both counts while its own results keep changing."""

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=5, ge=2)
    progress_factor: int = Field(default=3, ge=1)
    block: bool = False


class Cycle(_Ladder):
    """The ``cycle`` layer (opt-in): rounds of the same cycle of responses (A, B, A, B, ...)."""

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=5, ge=2)
    progress_factor: int = Field(default=3, ge=1)


class Drift(_Ladder):
    """The ``drift`` layer (opt-in): one tool's same result to calls that change a little."""

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=4, ge=2)


class SameReply(_Config):
    """The ``same_reply`` layer: the same calls ``stop_after`` times in a row stop, whatever the
    results (None: never; a ``polls`` tool whose result moves is waiting)."""

    stop_after: int | None = Field(default=8, ge=2)


class Calls(_Config):
    """How the detector tells calls apart and counts them over its window; ``per_tool`` caps."""

    window: int = Field(default=20, ge=2, le=1000)
    normalize_results: bool = True
    arg_policies: dict[str, ArgPolicy] = Field(default_factory=dict)
    read_only_tools: tuple[str, ...] = ()
    per_tool: dict[str, int] = Field(default_factory=dict)
    block_per_tool: bool = False

    @model_validator(mode="after")
    def _named(self) -> Calls:
        for tool, cap in self.per_tool.items():
            if not tool:
                raise ValueError("Calls: per_tool keys must be tool names")
            if cap < 1:
                raise ValueError(f"Calls: per_tool[{tool!r}] must be >= 1")
        if not all(self.read_only_tools) or len(set(self.read_only_tools)) != len(
                self.read_only_tools):
            raise ValueError("Calls: read_only_tools must be distinct tool names")
        return self


class LoopDetection(_Config):
    """Runaway tool-loop detection: warn, block the repeated call, then stop; the layers that run
    and one settings model per layer (each field: docs/loop-detection.md, "Reference")."""

    layers: tuple[str, ...] = DEFAULT_LAYERS
    no_progress: NoProgress = NoProgress()
    repeat: Repeat = Repeat()
    cycle: Cycle = Cycle()
    drift: Drift = Drift()
    same_reply: SameReply = SameReply()
    calls: Calls = Calls()
    ask_human: bool = False

    @property
    def blocking(self) -> tuple[str, ...]:
        """The layers whose stop is preceded by a block (of ``BLOCKABLE``)."""
        flags = (self.no_progress.block, self.repeat.block, self.calls.block_per_tool)
        return tuple(layer for layer, on in zip(BLOCKABLE, flags, strict=True) if on)

    def policy(self, tool: str) -> ArgPolicy | None:
        """The tool's policy (its own, else the ``"*"`` one)."""
        return self.calls.arg_policies.get(tool) or self.calls.arg_policies.get("*")

    def with_tool_hints(self, tools: Sequence[Any]) -> LoopDetection:
        """This configuration plus what the tools' metadata declares (explicit settings win)."""
        calls = self.calls
        hinted = [t.name for t in tools if read_only_hint(t) and t.name not in calls.read_only_tools]
        policies = {t.name: p for t in tools if t.name not in calls.arg_policies
                    and (p := tool_policy(getattr(t, "metadata", None) or {})) is not None}
        if not hinted and not policies:
            return self
        hints = calls.model_copy(update={"read_only_tools": (*calls.read_only_tools, *hinted),
                                         "arg_policies": {**calls.arg_policies, **policies}})
        return self.model_copy(update={"calls": hints})

    @model_validator(mode="before")
    @classmethod
    def _layers_of_given_settings(cls, data: Any) -> Any:
        """An opt-in layer whose own settings are given runs (unless ``layers`` is given)."""
        if not isinstance(data, Mapping) or "layers" in data:
            return data
        wanted = set(OPT_IN).intersection(data)
        if not wanted:
            return data
        return {**data, "layers": tuple(x for x in LAYERS if x in DEFAULT_LAYERS or x in wanted)}

    @model_validator(mode="after")
    def _ordered(self) -> LoopDetection:
        for name in ("repeat", "cycle"):
            if self.calls.window < getattr(self, name).stop_after:
                raise ValueError(f"LoopDetection: calls.window must be at least {name}.stop_after")
        if not set(self.layers) <= set(LAYERS):
            raise ValueError(f"LoopDetection: layers takes names of {LAYERS}")
        return self


def read_only_hint(tool: Any) -> bool:
    """MCP's ``readOnlyHint`` in a tool's metadata (flat, or under ``annotations``)."""
    metadata = getattr(tool, "metadata", None) or {}
    hint = metadata.get("readOnlyHint")
    annotations = metadata.get("annotations")
    if hint is None and annotations is not None:
        hint = (annotations.get("readOnlyHint") if isinstance(annotations, dict)
                else getattr(annotations, "readOnlyHint", None))
    return hint is True


def tool_policy(metadata: Mapping[str, Any]) -> ArgPolicy | None:
    """The policy a tool's metadata declares (``loop_key``, ``loop_<field>``), or None."""
    key = metadata.get("loop_key")
    fields: dict[str, Any] = {}
    if callable(key):
        fields["key"] = key
    elif key is not None:
        fields["keep"] = (key,) if isinstance(key, str) else tuple(key)
    for name in ("warn_after", "stop_after", "polls"):
        if metadata.get(f"loop_{name}") is not None:
            fields[name] = metadata[f"loop_{name}"]
    return ArgPolicy(**fields) if fields else None


class StallDetection(_Config):
    """Stop with ``stalled`` when the last ``consecutive`` iterations repeat themselves: the same
    answer, calls and results, or token totals within ``tolerance`` (``nodes/stall.py``)."""

    consecutive: int = Field(default=3, ge=2)
    tolerance: float = Field(default=0.10, ge=0.0, lt=1.0)


class BudgetPressure(_Config):
    """A finalize-now notice at ``threshold × Limits.token_budget``; the run stops with
    ``budget_pressure`` at that iteration's end unless it completes (docs/token-budget.md)."""

    threshold: float = Field(default=0.8, gt=0.0, lt=1.0)
    instruction: str = Field(default=prompts.BUDGET_PRESSURE, min_length=1)


class Limits(_Config):
    """Hard limits of one run (README, "Configuration models"; the budget: docs/token-budget.md)."""

    max_tool_calls: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    max_duration_s: float | None = Field(default=None, gt=0)
    final_answer: bool = True
    max_tool_output_chars: int | None = Field(default=100_000, ge=100)
    max_tool_errors: int | None = Field(default=None, ge=1)
    budget_pressure: BudgetPressure | None = None
    budget_check_in: bool = Field(default=False, strict=True)
    budget_scope: Literal["run", "thread"] = "run"

    @model_validator(mode="after")
    def _check_in_needs_a_budget(self) -> Limits:
        if self.budget_check_in and self.token_budget is None:
            raise ValueError("Limits: budget_check_in needs a token_budget")
        return self


class Approval(_Config):
    """Human approval of gated tools through ``interrupt()``."""

    tools: tuple[str, ...] = Field(min_length=1)
    resolver: Callable[..., Any] | None = None
    max_auto_rounds: int = Field(default=3, ge=0)
    description: str = "Tool execution requires approval"


class Compaction(_Config):
    """Replace the oldest messages by a summary when a request grows too large."""

    max_tokens: int = Field(ge=100)
    keep_last: int = Field(default=6, ge=1)
    summarizer: BaseChatModel | None = None


class Hooks(_Config):
    """The user's callbacks, sync or async: ``on_iteration_start(state)``, ``on_tool_call(record)``
    per executed or refused call, ``on_iteration_end(record, state)`` (True stops: ``terminated``),
    ``tool_filter(state, tools) -> tools`` (offered to each call; others are refused). A hook that
    raises stops the run with ``CallbackError`` naming it."""

    on_iteration_start: Callable[..., Any] | None = None
    on_iteration_end: Callable[..., Any] | None = None
    on_tool_call: Callable[..., Any] | None = None
    tool_filter: Callable[..., Any] | None = None


class JudgeVerdict(BaseModel):
    """The judge's structured answer."""

    answered: bool = Field(description="True only if the original request is fully answered.")
    reasoning: str = Field(default="", description="Why; what is missing when not answered.")


class Judge(_Config):
    """A second model that decides whether the original request is answered."""

    model: BaseChatModel
    criteria: tuple[str, ...] = ()
    instructions: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _criteria_not_one_string(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("criteria"), str):
            raise ValueError("Judge: criteria must be a list of strings, not one string")
        return data


class Iterations(_Config):
    """The outer loop (each field: README, "Configuration models"). An iteration ends when the
    model answers without tool calls; then ``should_continue`` decides, and when it says stop,
    the ``judge``; with neither, the first such answer ends the run (``completed``)."""

    max: int | None = Field(default=10, ge=1, strict=True)
    max_model_calls: int | None = Field(default=25, ge=1, strict=True)
    should_continue: Callable[..., Any] | None = None
    judge: Judge | None = None
    continuation: Callable[..., Any] | None = None
    record_feedback: Callable[..., Any] | None = None
    inject_progress: bool = Field(default=True, strict=True)
    fresh_context: bool = Field(default=False, strict=True)
    stall: StallDetection | None = None
