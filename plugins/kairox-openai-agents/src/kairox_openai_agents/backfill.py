"""The context ``get_items`` returns when the next question is not known yet.

The SDK reads a session's items before it hands over the new input, so there is no
question to recall for. Kairox's context assembled without one holds the system prompt,
memories, packs, pinned facts, compaction summaries and the history the summaries do
not replace; recall and retrieval, which need a question, hold nothing, so the window's
room for them would go unused. ``Backfill`` spends that room as the SDK's own sessions
spend all of it: on the session's older messages, verbatim, newest first, going back
past what compaction summarised, until the budget is full (never opening on a reply
whose user message did not fit).

The compaction summaries' room goes to those messages too when they need it (unless
``keep_summaries``): with no question to weigh them against, the newest turns verbatim
are kept before a summary's gist of older ones (on LoCoMo, bench_openai_agents.py, that
is what brings evidence recall level with the SDK's SQLiteSession). A summary stays
when the verbatim turns do not need its room.

Events below the history never change (the log is append-only), so they are read
once and cached; each call reads only what was appended since."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kairox_core import event_messages
from kairox_core.tokens import TokenCounter

if TYPE_CHECKING:
    from kairox_core import AssembledContext, ContextTrace, Kairox

SUMMARIES_TAG = "kairox:summaries"  # what the context's "summaries" layer block opens with
CONVERSATION_TYPES = ("UserMessageAdded", "AssistantMessageCompleted", "ToolInvocationCompleted")


@dataclass(frozen=True)
class Unit:
    """One conversation event: its messages as history renders them, and whether it
    opens an exchange (a user message)."""

    messages: tuple[Mapping[str, Any], ...]
    user: bool


class Backfill:
    """Older turns of one Kairox session, to fill a context's unused room."""

    def __init__(self, kx: Kairox, session_id: str, *, keep_summaries: bool = False) -> None:
        self.kx = kx
        self.session_id = session_id
        self.keep_summaries = keep_summaries
        self._units: list[Unit] = []  # conversation events read so far, oldest first
        self._last_seq = 0

    def fill(self, context: AssembledContext) -> list[dict[str, Any]]:
        """``context.messages`` with older turns put before its history, as many as its
        free tokens hold (and, unless ``keep_summaries``, the compaction summaries'
        tokens: see the module docstring)."""
        messages = [dict(m) for m in context.messages]
        trace = context.trace
        history = trace.layer("history")
        free = trace.budget - trace.total
        if free <= 0 or history.dropped:  # full, or the history itself was cut short
            return messages
        self._read_new()
        start = len(messages) - 1 - history.messages  # the history ends before the prompt
        older = self._older_than(messages[start:-1])
        if not older:
            return messages
        counter = TokenCounter(trace.encoding, margin=trace.margin)
        summaries = None if self.keep_summaries else _summaries_at(messages[:start], trace)
        room = free
        if summaries is not None:
            room += counter.message_tokens(messages[summaries])
        taken, used = newest_that_fit(older, room, counter)
        if summaries is not None and used > free:  # the verbatim turns need their room
            del messages[summaries]
            start -= 1
        elif summaries is not None:
            taken, used = newest_that_fit(older, free, counter)
        backfilled = [dict(m) for unit in taken for m in unit.messages]
        return [*messages[:start], *backfilled, *messages[start:]]

    def _read_new(self) -> None:
        events = self.kx.events(
            self.session_id, first_seq=self._last_seq + 1, types=CONVERSATION_TYPES
        )
        for event in events:
            messages = event_messages(event)
            if messages:
                self._units.append(Unit(messages, event.type == "UserMessageAdded"))
            self._last_seq = max(self._last_seq, event.seq or 0)

    def _older_than(self, history: Sequence[Mapping[str, Any]]) -> list[Unit]:
        """The units older than the oldest one ``history`` holds (oldest first). Units
        the history skips (a compacted stretch between held ones) are passed over."""
        end = len(history)
        for index in range(len(self._units) - 1, -1, -1):
            if end == 0:
                return self._units[: index + 1]
            unit = self._units[index]
            n = len(unit.messages)
            if n <= end and [dict(m) for m in history[end - n : end]] == [
                dict(m) for m in unit.messages
            ]:
                end -= n
        return []


def newest_that_fit(
    older: Sequence[Unit], room: int, counter: TokenCounter
) -> tuple[list[Unit], int]:
    """The newest of ``older`` (oldest first) that fit in ``room``, contiguous, never
    opening on an orphaned reply; oldest first, with what they cost."""
    taken: list[tuple[Unit, int]] = []
    used = 0
    for unit in reversed(older):
        cost = sum(counter.message_tokens(m) for m in unit.messages)
        if used + cost > room:
            break
        used += cost
        taken.append((unit, cost))
    while taken and not taken[-1][0].user:  # never open on an orphaned reply
        used -= taken.pop()[1]
    return [unit for unit, _ in reversed(taken)], used


def _summaries_at(blocks: Sequence[Mapping[str, Any]], trace: ContextTrace) -> int | None:
    """Where the compaction summaries' block is among the context's leading messages."""
    if not trace.layer("summaries").messages:
        return None
    tag = f"<{SUMMARIES_TAG}>"
    return next(
        (i for i, m in enumerate(blocks) if str(m.get("content") or "").startswith(tag)), None
    )
