"""Calling the configured compaction strategy and checking what it returns.

The strategy is looked up by ``[compaction] strategy`` in the plugin registry (the
``kairox_register_compaction_strategies`` hook) and given the original events (with
attachments folded in, see attachments.py) and the texts of the earlier summaries it
folds. Whatever it returns, secrets are redacted here before anything is stored, so a
third-party strategy cannot leak a key into the event store.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, cast

from kairox_core.capabilities import StrategyCapabilities, declared
from kairox_core.compaction.base import CompactionStrategy, WritesWithModel
from kairox_core.config import KairoxConfig
from kairox_core.context.sources import SummaryItem
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)

# the events whose stored ``tokens`` count the originals
MESSAGE_EVENTS = (UserMessageAdded, AssistantMessageCompleted, ToolInvocationCompleted)

if TYPE_CHECKING:
    from kairox_core.engines import EngineSession as Session


class CompactionStrategyError(Exception):
    """A strategy returned something unusable (recorded as ContextCompactionFailed)."""


@dataclass(frozen=True)
class StrategyOutcome:
    """A summary ready to store: redacted text plus what produced it and its cost."""

    text: str
    strategy: str
    model: str | None
    tokens_in: int
    tokens_out: int
    usage: dict[str, int] | None = None


class BuiltStrategy(NamedTuple):
    """A strategy and what it declares (``StrategyCapabilities``), checked once."""

    strategy: CompactionStrategy
    capabilities: StrategyCapabilities

    def model(self) -> WritesWithModel | None:
        """The strategy as a writer with a model, when it declares one."""
        return cast(WritesWithModel, self.strategy) if self.capabilities.model else None


def build_strategy(config: KairoxConfig, session: Session | None = None) -> BuiltStrategy:
    """The strategy object ``[compaction] strategy`` names (through the plugin hook),
    checked against the ``CompactionStrategy`` protocol and its declared capabilities."""
    from kairox_core.plugins import COMPACTION_STRATEGIES, get_plugins

    registration = get_plugins().get(
        COMPACTION_STRATEGIES, config.compaction.strategy, context="compaction.strategy"
    )
    profile = session.profile if session is not None else None
    strategy = registration.factory(config=config, profile=profile)
    if not isinstance(strategy, CompactionStrategy):
        raise CompactionStrategyError(
            f"strategy {config.compaction.strategy!r} (plugin '{registration.plugin}') is a "
            f"{type(strategy).__name__} without a summarize(request) method"
        )
    what = f"compaction strategy {config.compaction.strategy!r}"
    return BuiltStrategy(strategy, declared(strategy, what, StrategyCapabilities()))


async def run_strategy(
    config: KairoxConfig,
    session: Session,
    originals: Sequence[Event],
    folded: Sequence[SummaryItem],
    prepared: Sequence[Event],
) -> StrategyOutcome:
    """Summarise ``prepared`` (the originals as the strategy should read them) together
    with the folded summaries' texts; redact; count."""
    from kairox_core.compaction.base import CompactionRequest, as_output
    from kairox_core.compaction.redaction import redact_secrets
    from kairox_core.tokens import TokenCounter

    strategy = build_strategy(config, session).strategy
    counter = TokenCounter()
    request = CompactionRequest(
        events=list(prepared),
        previous_summaries=[s.text for s in folded],
        target_tokens=config.compaction.target_tokens,
        pinned=[f.text for f in session.compaction.pinned],
        memory_keys=[m.key for m in session.memories() if m.key],
        counter=counter,
    )
    raw = strategy.summarize(request)
    if inspect.isawaitable(raw):
        raw = await raw
    try:
        output = as_output(raw, config.compaction.strategy)
    except TypeError as exc:
        raise CompactionStrategyError(str(exc)) from None
    text = output.text
    text = redact_secrets(text).strip()
    tokens_in = sum(e.tokens or 0 for e in originals if isinstance(e, MESSAGE_EVENTS))
    tokens_in += sum(counter.count(s.text) for s in folded)
    return StrategyOutcome(
        text=text,
        strategy=output.strategy or config.compaction.strategy,
        model=output.model,
        tokens_in=tokens_in,
        tokens_out=counter.count(text),
        usage=output.usage,
    )
