"""What the assembler reads: memories, compacted history, and history units.

These are plain values so the assembler stays a pure function of its inputs. The
compaction events (``FactPinned``, ``CompactionSummary``, ``SummaryEdited``,
``ChunkDropped``) are folded into pinned facts and active summaries by
``CompactionState``; history comes as ``HistoryUnit``s, newest first (see history.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from kairox_core.events import (
    ChunkDropped,
    CompactionSummary,
    Event,
    FactPinned,
    FactUnpinned,
    SummaryEdited,
)
from kairox_core.memory.records import MemoryRecord


@dataclass(frozen=True)
class MemoryItem:
    """An approved memory as the assembler sees it (any ``MemoryRecord`` converts)."""

    id: str
    scope: str
    key: str | None
    body: str
    updated_at: float = 0.0

    @classmethod
    def from_record(cls, record: MemoryRecord) -> MemoryItem:
        return cls(
            id=record.id,
            scope=record.scope.value,
            key=record.key,
            body=record.body,
            updated_at=record.updated_at,
        )


@dataclass(frozen=True)
class PinnedFact:
    """A fact pinned by the user: always included verbatim, whatever compaction does."""

    fact_id: str
    text: str
    seq: int = 0
    source_seq: int | None = None


@dataclass(frozen=True)
class SummaryItem:
    """An active compaction summary, with edits and dropped chunks applied.

    ``first_seq``..``last_seq`` (inclusive) is the range of original events it replaces:
    history skips those seqs and the summary stands in for them.
    """

    seq: int
    first_seq: int
    last_seq: int
    text: str
    strategy: str = ""


HistoryKind = Literal["user", "assistant", "tool"]


class HistoryUnit(NamedTuple):
    """One history message, or a tool call + its result (kept or dropped together).

    ``tokens`` is what the unit's messages cost, framing included, under the counter in
    use; it is computed once, when the event is written, and stored with the event.
    A named tuple, immutable like a frozen dataclass but built in a third of the time:
    a cold turn builds about a thousand of them.
    """

    seq: int
    turn_id: str
    kind: HistoryKind
    messages: tuple[Mapping[str, Any], ...]
    tokens: int


@runtime_checkable
class HistorySource(Protocol):
    """History newest first. The assembler stops pulling as soon as the budget is full,
    so a source should read lazily (reverse pages), never the whole session."""

    def newest_first(self) -> Iterator[HistoryUnit]: ...


@runtime_checkable
class WindowedHistory(HistorySource, Protocol):
    """A source that answers the assembler's window itself (the session's cached history,
    from running sums): ``within(room)`` is what ``units_within(newest_first(), room)``
    gives, without walking the units."""

    def within(self, room: int) -> tuple[list[HistoryUnit], HistoryUnit | None]: ...


def units_within(
    units: Iterable[HistoryUnit], room: int
) -> tuple[list[HistoryUnit], HistoryUnit | None]:
    """The newest units (``units`` is newest first) whose tokens fit in ``room``, stopping
    at the first that does not, and that unit (None: the units ran out)."""
    taken: list[HistoryUnit] = []
    used = 0
    for unit in units:
        if used + unit.tokens > room:
            return taken, unit
        taken.append(unit)
        used += unit.tokens
    return taken, None


@dataclass(frozen=True)
class ListHistory:
    """A ``HistorySource`` over units given oldest first (tests, previews)."""

    units: tuple[HistoryUnit, ...]

    def newest_first(self) -> Iterator[HistoryUnit]:
        return iter(self.units[::-1])


@dataclass
class CompactionState:
    """Pinned facts and active summaries, folded from compaction events in seq order.

    Feed it events with ``apply`` (any types; others are ignored). ``watermark`` is the
    highest seq seen, so a session can keep one and apply only newer events each turn.
    """

    watermark: int = 0
    _pinned: dict[str, PinnedFact] = field(default_factory=dict)
    _summaries: dict[int, CompactionSummary] = field(default_factory=dict)
    _folded: set[int] = field(default_factory=set)
    _edits: dict[int, str] = field(default_factory=dict)
    _dropped: dict[int, list[str]] = field(default_factory=dict)

    def apply(self, events: Iterable[Event]) -> None:
        for event in events:
            if event.seq is not None:
                self.watermark = max(self.watermark, event.seq)
            if isinstance(event, FactPinned):
                self._pinned[event.fact_id] = PinnedFact(
                    fact_id=event.fact_id,
                    text=event.text,
                    seq=event.seq or 0,
                    source_seq=event.source_seq,
                )
            elif isinstance(event, FactUnpinned):
                self._pinned.pop(event.fact_id, None)
            elif isinstance(event, CompactionSummary) and event.seq is not None:
                self._summaries[event.seq] = event
                self._folded.update(event.folded_summaries)
            elif isinstance(event, SummaryEdited):
                self._edits[event.summary_seq] = event.text
                self._dropped.pop(event.summary_seq, None)  # the edit already lacks them
            elif isinstance(event, ChunkDropped):
                self._dropped.setdefault(event.summary_seq, []).append(event.text)

    @property
    def pinned(self) -> list[PinnedFact]:
        return sorted(self._pinned.values(), key=lambda f: (f.seq, f.fact_id))

    @property
    def summaries(self) -> list[SummaryItem]:
        """Active summaries (not folded into a later one), oldest range first."""
        items = []
        for seq, summary in self._summaries.items():
            if seq in self._folded:
                continue
            text = self._edits.get(seq, summary.summary)
            for chunk in self._dropped.get(seq, ()):
                text = _drop_line(text, chunk)
            items.append(
                SummaryItem(
                    seq=seq,
                    first_seq=summary.first_seq,
                    last_seq=summary.last_seq,
                    # rstrip only: a dropped first line stays a blank line, so the
                    # other lines keep their numbers (summary_lines.numbered_lines)
                    text=text.rstrip(),
                    strategy=summary.strategy,
                )
            )
        return sorted(items, key=lambda s: (s.first_seq, s.seq))

    def covered_ranges(self) -> list[tuple[int, int]]:
        """Merged seq ranges that active summaries replace, ascending."""
        merged: list[tuple[int, int]] = []
        for s in self.summaries:
            if merged and s.first_seq <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], s.last_seq))
            else:
                merged.append((s.first_seq, s.last_seq))
        return merged


def _drop_line(text: str, chunk: str) -> str:
    """Blank the first line equal to ``chunk`` (chunks are lines, so numbering of the
    other lines stays as it was)."""
    if not chunk.strip():
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line == chunk:
            lines[i] = ""
            return "\n".join(lines)
    return text
