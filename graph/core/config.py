"""Configuration models: keyword-only, validated, immutable.

Every model raises ``ValueError`` (pydantic's ``ValidationError`` is one) naming
the offending field when a value or a combination is invalid.

Example:
    >>> from langgraph_loop import Iterations, Limits, LoopDetection, Repeat
    >>> Iterations(max=3, max_model_calls=5).max_model_calls
    5
    >>> Limits(max_tool_calls=20).max_tool_calls
    20
    >>> LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)).layers  # given: switched on
    ('no_progress', 'repeat', 'same_reply', 'per_tool', 'text')
    >>> Limits(token_budget=10_000, budget_pressure={"threshold": 0.7}).budget_pressure.threshold
    0.7
    >>> try:
    ...     LoopDetection(repeat=Repeat(warn_after=5, stop_after=3))
    ... except ValueError as exc:
    ...     print("stop_after" in str(exc))
    True
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


LAYERS: tuple[str, ...] = ("no_progress", "drift", "cycle", "repeat", "same_reply", "per_tool", "text")
"""Every detection layer, in the order their findings are ranked."""
DEFAULT_LAYERS: tuple[str, ...] = ("no_progress", "same_reply", "per_tool", "text")
"""The layers on by default. Each earns its place on recorded runs of several kinds of work
(``python -m benchmarks.rivals``, docs/loop-detection.md): ``drift`` stopped batch
work (one call per item, answered alike), and ``repeat`` and ``cycle`` add nothing the stuck-call
layer does not stop first. A layer whose own settings are given is switched on with them."""

OPT_IN: tuple[str, ...] = ("repeat", "cycle", "drift")
"""The opt-in layers with settings of their own: giving them switches the layer on."""

BLOCKABLE: tuple[str, ...] = ("no_progress", "repeat", "per_tool")
"""The layers whose stop rung may be preceded by a block (their findings name calls)."""


class ArgPolicy(_Config):
    """What makes two calls of one tool "the same", and its own stagnation thresholds.

    ``ignore`` drops fields; ``keep`` keeps only the listed ones; ``key`` maps the arguments
    to what identifies the call. ``warn_after``/``stop_after`` replace ``NoProgress``'s for
    this tool. ``polls``: asking again while its result changes is waiting, not looping. A
    tool's metadata may declare the same (``loop_key``, ``loop_warn_after``,
    ``loop_stop_after``, ``loop_polls``; docs/loop-detection.md).
    """

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


class NoProgress(_Config):
    """The ``no_progress`` layer: a call asked for again after its own identical results.

    Attributes:
        warn_after: the call's own identical results after which asking again warns.
        stop_after: identical results after which asking again stops (or blocks first).
        no_content_after: the least count for a call whose result had no content.
        call_window: calls (not responses) a call is remembered for after its last request.
        path_excuse: a call naming one of the same paths excuses the next identical result.
        block: at ``stop_after`` the call is answered with an error instead of running;
            asking for it again stops.
        block_only_interleaved: block (rather than stop) only a repeat after which something
            new was done that may change what it sees (docs/loop-detection.md, "Reference").
    """

    warn_after: int = Field(default=2, ge=1)
    stop_after: int = Field(default=3, ge=2)
    no_content_after: int = Field(default=4, ge=1)
    call_window: int = Field(default=30, ge=2, le=10_000)
    path_excuse: bool = True
    block: bool = True
    block_only_interleaved: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> NoProgress:
        return _warn_before_stop(self)


class Repeat(_Config):
    """The ``repeat`` layer (opt-in): one call present in many responses of the window.

    Attributes:
        warn_after: responses of the window holding the call that warn.
        stop_after: responses holding it that stop (or block first, with ``block``).
        progress_factor: a repeated call whose own results keep changing warns and stops at
            this many times ``warn_after``/``stop_after`` (capped by the window).
        block: at ``stop_after`` the call is refused once before the run stops.
    """

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=5, ge=2)
    progress_factor: int = Field(default=3, ge=1)
    block: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> Repeat:
        return _warn_before_stop(self)


class Cycle(_Config):
    """The ``cycle`` layer (opt-in): the same round of responses (A, B, A, B, ...) again.

    Attributes:
        warn_after: rounds of the cycle that warn.
        stop_after: rounds that stop.
        progress_factor: while a result of the round keeps changing, both counts are this
            many times higher (capped by the window).
    """

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=5, ge=2)
    progress_factor: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Cycle:
        return _warn_before_stop(self)


class Drift(_Config):
    """The ``drift`` layer (opt-in): one tool returning the same result to calls whose
    arguments change a little each time (a command that grows or drifts).

    Attributes:
        warn_after: such results in a row that warn.
        stop_after: such results in a row that stop.
    """

    warn_after: int = Field(default=3, ge=1)
    stop_after: int = Field(default=4, ge=2)

    @model_validator(mode="after")
    def _ordered(self) -> Drift:
        return _warn_before_stop(self)


class SameReply(_Config):
    """The ``same_reply`` layer: the same response (the same calls) again and again.

    Attributes:
        stop_after: this many times in a row stops, whatever the results: a runaway, such
            as an insertion applied again and again (None: never; tools declared ``polls``
            whose results move are waiting).
    """

    stop_after: int | None = Field(default=8, ge=2)


class Calls(_Config):
    """How the detector tells calls apart and counts them over its window, and the caps of
    the ``per_tool`` layer.

    Attributes:
        window: recent tool-calling responses the repeat, cycle and per-tool layers look at.
        normalize_results: compare results with their volatile parts replaced.
        arg_policies: per-tool ``ArgPolicy`` (``"*"``: tools without their own).
        read_only_tools: tools that change nothing (also MCP's ``readOnlyHint``).
        per_tool: caps on calls of one tool in the window: reaching one warns, exceeding stops.
        block_per_tool: a call over its tool's cap is refused once before the run stops.
    """

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


def _warn_before_stop(settings: Any) -> Any:
    if settings.stop_after <= settings.warn_after:
        raise ValueError(f"{type(settings).__name__}: stop_after must be greater than warn_after")
    return settings


class LoopDetection(_Config):
    """Runaway tool-loop detection: warn, block the repeated call, then stop
    (docs/loop-detection.md, "Reference").

    Attributes:
        layers: the layers that run (default ``DEFAULT_LAYERS``; giving an opt-in layer's
            settings switches it on).
        no_progress: ``NoProgress``: a call asked for again after its own identical results.
        repeat: ``Repeat``: one call in many responses of the window.
        cycle: ``Cycle``: the same round of responses again.
        drift: ``Drift``: the same result to calls that change a little.
        same_reply: ``SameReply``: the same response again and again.
        calls: ``Calls``: the window, call identity, read-only tools, ``per_tool`` caps.
        ask_human: ``interrupt()`` with the evidence instead of a loop stop (needs a
            checkpointer; docs/loop-detection.md, "Let a person decide").
    """

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
        """This configuration plus what the tools' metadata declares (explicit settings win).

        Example:
            >>> from langchain_core.tools import StructuredTool
            >>> lookup = StructuredTool.from_function(
            ...     lambda key: key, name="lookup", description="Read a record.",
            ...     metadata={"readOnlyHint": True, "loop_key": ["key"], "loop_stop_after": 5})
            >>> cfg = LoopDetection().with_tool_hints([lookup])
            >>> cfg.calls.read_only_tools, cfg.calls.arg_policies["lookup"].stop_after
            (('lookup',), 5)
        """
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
    """The policy a tool's metadata declares (``loop_key``, ``loop_warn_after``,
    ``loop_stop_after``, ``loop_polls``), or None.

    Example:
        >>> tool_policy({"loop_key": ["path"], "loop_stop_after": 5})
        ArgPolicy(ignore=(), keep=('path',), key=None, warn_after=None, stop_after=5, polls=False)
        >>> tool_policy({"title": "Read"}) is None
        True
    """
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
    """Stop with ``stalled`` when the last ``consecutive`` iterations repeat themselves: the
    same answer, the same calls and results, or token totals within ``tolerance``
    (``max - min <= tolerance * min``); new work is never a stall (``nodes/stall.py``).
    """

    consecutive: int = Field(default=3, ge=2)
    tolerance: float = Field(default=0.10, ge=0.0, lt=1.0)


class BudgetPressure(_Config):
    """Finalize-now notice when agent tokens reach ``threshold × Limits.token_budget``
    (docs/token-budget.md): the run stops with ``budget_pressure`` at the end of that
    iteration unless it ends as ``completed`` anyway.
    """

    threshold: float = Field(default=0.8, gt=0.0, lt=1.0)
    instruction: str = Field(default=prompts.BUDGET_PRESSURE, min_length=1)


class Limits(_Config):
    """Hard limits of one run (the per-iteration limit is ``Iterations.max_model_calls``).

    Attributes:
        max_tool_calls: tool executions per run (None = unbounded).
        token_budget: agent tokens per run, the final answer included (None = unbounded).
        max_duration_s: wall-clock seconds per run, checked between steps.
        final_answer: after a stop, one last model call with no tools bound.
        max_tool_output_chars: longer tool outputs are cut to this size, with a note.
        max_tool_errors: all-error tool rounds in a row that stop (``tool_errors``).
        budget_pressure: a finalize-now notice near ``token_budget`` (None = off).
        budget_check_in: at ``token_budget``, ask a person (``interrupt()``) instead of
            stopping (docs/token-budget.md).
        budget_scope: ``"run"`` (default): ``token_budget`` is per run; ``"thread"``: one
            budget for the whole thread.
    """

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
    """Human approval of gated tools through ``interrupt()``.
    """

    tools: tuple[str, ...] = Field(min_length=1)
    resolver: Callable[..., Any] | None = None
    max_auto_rounds: int = Field(default=3, ge=0)
    description: str = "Tool execution requires approval"


class Compaction(_Config):
    """Replace the oldest messages by a summary when a request grows too large.
    """

    max_tokens: int = Field(ge=100)
    keep_last: int = Field(default=6, ge=1)
    summarizer: BaseChatModel | None = None


class Hooks(_Config):
    """The user's callbacks at points of the loop; sync or async (README, "Configuration models").

    Per iteration: ``on_iteration_start(state)``, ``on_tool_call(record)`` for each executed
    or refused call, ``on_iteration_end(record, state)`` (True stops the run with
    ``terminated``). A hook that raises stops the run with ``CallbackError`` naming it.
    ``tool_filter(state, tools) -> tools`` chooses the tools offered to each model call; a
    call of a tool not offered is refused at execution.
    """

    on_iteration_start: Callable[..., Any] | None = None
    on_iteration_end: Callable[..., Any] | None = None
    on_tool_call: Callable[..., Any] | None = None
    tool_filter: Callable[..., Any] | None = None


class JudgeVerdict(BaseModel):
    """The judge's structured answer.
    """

    answered: bool = Field(description="True only if the original request is fully answered.")
    reasoning: str = Field(default="", description="Why; what is missing when not answered.")


class Judge(_Config):
    """A second model that decides whether the original request is answered.
    """

    model: BaseChatModel
    criteria: tuple[str, ...] = ()
    instructions: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _tuple_criteria(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("criteria"), str):
            raise ValueError("Judge: criteria must be a list of strings, not one string")
        if isinstance(data, dict) and isinstance(data.get("criteria"), Sequence):
            data = {**data, "criteria": tuple(data["criteria"])}
        return data


class Iterations(_Config):
    """The outer loop: how many iterations, when to go on, and what starts the next one.

    An iteration ends when the model answers without tool calls. With neither
    ``should_continue`` nor ``judge`` the first such answer ends the run (``completed``);
    with one of them it decides (the predicate first; when it says stop, the judge).

    Attributes:
        max: iterations per run (None = unbounded; ``max_iterations`` stops the run).
        max_model_calls: model calls per iteration (None = unbounded).
        should_continue: ``(state) -> bool | (bool, feedback)``, asked when an iteration ends.
        judge: a second model that decides whether the original request is answered.
        continuation: ``(state, feedback) -> str | None``: the next iteration's text (None:
            the previous iteration's input again; default: a text with the feedback).
        record_feedback: ``(state, feedback) -> str | None``: an iteration's progress entry
            (default: the start of its answer).
        inject_progress: put the latest progress entry before the continuation text.
        fresh_context: later iterations see only the request, the progress log and their own.
        stall: stop (``stalled``) when iterations repeat themselves without new work.
    """

    max: int | None = Field(default=10, ge=1, strict=True)
    max_model_calls: int | None = Field(default=25, ge=1, strict=True)
    should_continue: Callable[..., Any] | None = None
    judge: Judge | None = None
    continuation: Callable[..., Any] | None = None
    record_feedback: Callable[..., Any] | None = None
    inject_progress: bool = Field(default=True, strict=True)
    fresh_context: bool = Field(default=False, strict=True)
    stall: StallDetection | None = None
