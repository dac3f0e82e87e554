"""Which stretch of a session to compact: whole exchanges, oldest first, recent kept.

An *exchange* is one turn: the user message and everything the turn recorded after it
(tool calls with their results, the reply), so a tool call and its result are never
split. Planning reads only light columns (seq, type, turn id, stored token count) of the
conversation events not already replaced by an active summary
(``EventStore.conversation_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kairox_core.context.sources import SummaryItem
from kairox_core.store.event_store import CONVERSATION_TYPES, Row

__all__ = ["CONVERSATION_TYPES", "Exchange", "Plan", "Row"]


@dataclass(frozen=True)
class Exchange:
    """One turn's conversation events (seq order)."""

    turn_id: str
    rows: tuple[Row, ...]

    @property
    def first_seq(self) -> int:
        return self.rows[0].seq

    @property
    def last_seq(self) -> int:
        return self.rows[-1].seq

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.rows)


@dataclass(frozen=True)
class Plan:
    """A compaction to run: the range it replaces and the earlier summaries it folds."""

    first_seq: int
    last_seq: int
    exchanges: tuple[Exchange, ...] = ()
    folded: tuple[SummaryItem, ...] = field(default=())

    @property
    def folded_seqs(self) -> tuple[int, ...]:
        return tuple(s.seq for s in self.folded)


def covered(seq: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(a <= seq <= b for a, b in ranges)


def gaps(lo: int, hi: int, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``lo..hi`` (inclusive) outside ``ranges``, ascending."""
    out: list[tuple[int, int]] = []
    cursor = lo
    for a, b in sorted(ranges):
        if a > cursor:
            out.append((cursor, min(a - 1, hi)))
        cursor = max(cursor, b + 1)
        if cursor > hi:
            break
    if cursor <= hi:
        out.append((cursor, hi))
    return [(a, b) for a, b in out if a <= b]


def exchanges(rows: Sequence[Row]) -> list[Exchange]:
    """Group rows into turns. A row whose turn differs from the one before starts a new
    exchange, so a turn split by a summary boundary yields two (kept apart)."""
    out: list[list[Row]] = []
    for row in rows:
        if out and out[-1][-1].turn_id == row.turn_id and row.type != "UserMessageAdded":
            out[-1].append(row)
        else:
            out.append([row])
    return [Exchange(group[0].turn_id, tuple(group)) for group in out]


def oldest_stretch(
    rows: Sequence[Row],
    ranges: Sequence[tuple[int, int]],
    keep_recent: int,
    *,
    exclude_turn: str | None = None,
) -> list[Exchange]:
    """The oldest run of uncompacted exchanges not broken by a summary, leaving the
    ``keep_recent`` newest exchanges (and ``exclude_turn``, a turn still open) alone."""
    exs = [e for e in exchanges(rows) if e.turn_id != exclude_turn or not exclude_turn]
    candidates = exs[: max(0, len(exs) - keep_recent)]
    stretch: list[Exchange] = []
    for ex in candidates:
        if stretch and any(stretch[-1].last_seq < a <= ex.first_seq for a, _ in ranges):
            break  # a summary lies between: the stretch ends here
        stretch.append(ex)
    return stretch


def cap_stretch(stretch: Sequence[Exchange], max_tokens: int) -> list[Exchange]:
    """The oldest exchanges of ``stretch`` within ``max_tokens`` (always at least one)."""
    out: list[Exchange] = []
    used = 0
    for ex in stretch:
        if out and used + ex.tokens > max_tokens:
            break
        out.append(ex)
        used += ex.tokens
    return out


def with_folds(
    first_seq: int,
    last_seq: int,
    summaries: Sequence[SummaryItem],
    *,
    fold_before: bool,
) -> tuple[int, int, tuple[SummaryItem, ...]]:
    """Widen ``first_seq..last_seq`` over every active summary it overlaps (and, when
    ``fold_before``, over all earlier ones), so the new summary replaces them whole."""
    lo, hi = first_seq, last_seq
    folded: list[SummaryItem] = []
    changed = True
    while changed:
        changed = False
        for s in summaries:
            if s in folded:
                continue
            overlaps = s.first_seq <= hi and s.last_seq >= lo
            if overlaps or (fold_before and s.last_seq < lo):
                folded.append(s)
                lo, hi = min(lo, s.first_seq), max(hi, s.last_seq)
                changed = True
    return lo, hi, tuple(sorted(folded, key=lambda s: s.first_seq))


def align_to_turns(rows: Sequence[Row], first_seq: int, last_seq: int) -> tuple[int, int]:
    """Widen a manual range to whole exchanges (a turn is compacted whole or not at all)."""
    lo, hi = first_seq, last_seq
    for ex in exchanges(rows):
        if ex.first_seq <= hi and ex.last_seq >= lo:
            lo, hi = min(lo, ex.first_seq), max(hi, ex.last_seq)
    return lo, hi
