"""Contract tests for compaction strategies: subclass ``CompactionStrategyContract``.

A subclass supplies ``make_strategy(summary)``: the strategy under test (``summary`` is
what a model-backed strategy's model answers; a strategy without a model ignores it).
Every strategy then satisfies the ``CompactionStrategy`` protocol, summarises a
conversation into a non-empty text within ``target_tokens`` (``fits_target``), names
itself, and an empty request never crashes it.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from kairox_core.compaction.base import (
    CompactionOutput,
    CompactionRequest,
    CompactionStrategy,
    as_output,
)
from kairox_core.events import AssistantMessageCompleted, Event, UserMessageAdded
from kairox_core.tokens import TokenCounter

CONTRACT_SUMMARY = "The user plans a garden: tomatoes in May, basil beside them."


def contract_events(turns: int = 6) -> list[Event]:
    """A conversation with facts worth keeping, seq numbers set as the store would."""
    events: list[Event] = []
    for i in range(turns):
        events.append(
            UserMessageAdded(
                session_id="s",
                turn_id=f"t{i}",
                text=f"Question {i}: when should I plant tomatoes, and is basil a good neighbour?",
                seq=2 * i + 1,
            )
        )
        events.append(
            AssistantMessageCompleted(
                session_id="s",
                turn_id=f"t{i}",
                text=f"Answer {i}: plant tomatoes in May after the frost; basil helps them.",
                seq=2 * i + 2,
            )
        )
    return events


class CompactionStrategyContract:
    """Subclass and implement ``make_strategy``."""

    #: False for strategies that cannot promise ``target_tokens`` (a model may overrun)
    fits_target: bool = True

    def make_strategy(self, summary: str) -> Any:
        raise NotImplementedError

    def _summarize(self, strategy: Any, request: CompactionRequest) -> CompactionOutput:
        value = strategy.summarize(request)
        if inspect.isawaitable(value):

            async def wait() -> Any:
                return await value

            value = asyncio.run(wait())
        return as_output(value)

    def test_is_a_compaction_strategy(self) -> None:
        assert isinstance(self.make_strategy(CONTRACT_SUMMARY), CompactionStrategy)

    def test_summarises_a_conversation_into_text(self) -> None:
        request = CompactionRequest(events=contract_events(), target_tokens=60)
        out = self._summarize(self.make_strategy(CONTRACT_SUMMARY), request)
        assert isinstance(out, CompactionOutput)
        assert out.text.strip()
        assert out.text != "\n".join(i.text for i in request.items)  # not the input as is

    def test_the_summary_fits_the_target(self) -> None:
        if not self.fits_target:
            return
        counter = TokenCounter()
        wordy = " ".join([CONTRACT_SUMMARY] * 40)  # a model that says far too much
        for target in (20, 60, 200):
            request = CompactionRequest(events=contract_events(), target_tokens=target)
            out = self._summarize(self.make_strategy(wordy), request)
            assert counter.count(out.text) <= target, (target, out.text)

    def test_previous_summaries_are_part_of_the_input(self) -> None:
        request = CompactionRequest(
            events=contract_events(2),
            previous_summaries=["Earlier: the user lives in Lyon and gardens on a balcony."],
            target_tokens=200,
        )
        assert request.items[0].role == "summary"
        out = self._summarize(self.make_strategy(CONTRACT_SUMMARY), request)
        assert out.text.strip()

    def test_usage_figures_are_counts(self) -> None:
        request = CompactionRequest(events=contract_events(), target_tokens=60)
        out = self._summarize(self.make_strategy(CONTRACT_SUMMARY), request)
        assert out.tokens_in >= 0 and out.tokens_out >= 0
        if out.model is not None:  # a model wrote it: the usage says what it cost
            assert isinstance(out.model, str) and out.model
