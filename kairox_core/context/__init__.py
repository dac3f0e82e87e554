"""Context assembly: every turn's prompt rebuilt from scratch under the token budget."""

from __future__ import annotations

from kairox_core.context.assembler import AssembledContext, ContextAssembler
from kairox_core.context.counting import ProfileCounter, counter_for_profile
from kairox_core.context.errors import ContextBudgetExceeded
from kairox_core.context.history import EventHistory
from kairox_core.context.sources import (
    CompactionState,
    HistorySource,
    HistoryUnit,
    ListHistory,
    MemoryItem,
    PinnedFact,
    SummaryItem,
)
from kairox_core.context.trace import ContextTrace, LayerTrace, TraceItem

__all__ = [
    "AssembledContext",
    "CompactionState",
    "ContextAssembler",
    "ContextBudgetExceeded",
    "ContextTrace",
    "EventHistory",
    "HistorySource",
    "HistoryUnit",
    "LayerTrace",
    "ListHistory",
    "MemoryItem",
    "PinnedFact",
    "ProfileCounter",
    "SummaryItem",
    "TraceItem",
    "counter_for_profile",
]
