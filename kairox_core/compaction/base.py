"""The compaction strategy interface.

A strategy turns a stretch of old history into one summary. The compactor builds a
``CompactionRequest`` (the original events, the texts of earlier summaries being
folded, pinned facts, approved memory keys, a token target and the counter to measure
it with) and awaits ``strategy.summarize(request)``. A model-based strategy renders
``request.items`` into a prompt and calls a ``ModelProvider`` (providers/base.py),
reporting the model and its usage; the built-in ``extractive`` strategy needs no model.
Secrets are redacted by the compactor from whatever a strategy returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.tokens import TokenCounter

if TYPE_CHECKING:
    from kairox_core.providers.base import ModelProvider


@dataclass(frozen=True)
class HistoryItem:
    """One message of the stretch being compacted, as a strategy reads it."""

    role: str  # "user", "assistant", "tool" or "summary" (an earlier summary folded in)
    text: str
    seq: int | None = None
    name: str | None = None  # the tool's name for role "tool"


def history_items(events: Sequence[Event]) -> list[HistoryItem]:
    """The conversation events as items (other event types carry no history text)."""
    items: list[HistoryItem] = []
    for e in events:
        if isinstance(e, UserMessageAdded):
            items.append(HistoryItem("user", e.text, e.seq))
        elif isinstance(e, AssistantMessageCompleted):
            items.append(HistoryItem("assistant", e.text, e.seq))
        elif isinstance(e, ToolInvocationCompleted):
            items.append(HistoryItem("tool", e.result, e.seq, e.tool_name))
    return items


@dataclass
class CompactionRequest:
    """What a strategy is asked to summarise, and how big the summary may be."""

    events: list[Event] = field(default_factory=list)
    previous_summaries: list[str] = field(default_factory=list)
    target_tokens: int = 512
    pinned: list[str] = field(default_factory=list)
    memory_keys: list[str] = field(default_factory=list)
    counter: TokenCounter = field(default_factory=TokenCounter)
    extra_items: list[HistoryItem] = field(default_factory=list)

    @property
    def items(self) -> list[HistoryItem]:
        """Earlier summaries first (they cover older turns), then the messages in order."""
        folded = [HistoryItem("summary", text) for text in self.previous_summaries if text]
        return folded + history_items(self.events) + list(self.extra_items)


@dataclass(frozen=True)
class CompactionOutput:
    """A strategy's summary. ``model`` is None when no model wrote it."""

    text: str
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    usage: dict[str, int] | None = None
    strategy: str | None = None


@runtime_checkable
class CompactionStrategy(Protocol):
    """Registered through ``kairox_register_compaction_strategies`` as
    ``register(name, factory)``; ``factory(**options)`` (``config=``, ``profile=``
    among them) returns an object with this shape: ``summarize`` may be a coroutine
    function or a plain one. The compactor checks a strategy against this protocol;
    its name is the one it was registered under."""

    def summarize(
        self, request: CompactionRequest
    ) -> CompactionOutput | Awaitable[CompactionOutput]: ...


class WritesWithModel(Protocol):
    """A strategy declaring ``StrategyCapabilities(model=True)``: ``provider()`` builds
    the provider it writes with (the caller closes it)."""

    def provider(self) -> ModelProvider: ...


def as_output(value: Any, strategy: str | None = None) -> CompactionOutput:
    """Accept a ``CompactionOutput`` or anything with ``.text`` (third-party strategies),
    its ``usage`` as a plain dict (a provider's ``TokenUsage`` or any mapping): what a
    plugin's strategy returned is validated here, once, and typed from then on."""
    if isinstance(value, CompactionOutput):
        return replace(value, usage=_usage(value.usage))
    text = getattr(value, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"a compaction strategy returned {type(value).__name__}, not a summary")
    usage = _usage(getattr(value, "usage", None))
    return CompactionOutput(text, getattr(value, "model", None), usage=usage, strategy=strategy)


def _usage(value: object) -> dict[str, int] | None:
    from kairox_core.providers.base import TokenUsage

    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, TokenUsage):
        return value.as_dict()
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"a compaction strategy reported usage as {type(value).__name__}")
