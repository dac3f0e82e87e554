"""History from the event store, newest first, in reverse pages, with cached counts.

Reading the whole session each turn would make a turn cost grow with session length.
Instead we read the conversation events backwards a page at a time (the assembler stops
pulling when the budget is full), skip seq ranges a compaction summary replaced, and
use the token count stored in each event when it was written; only an event counted
under another scheme (a profile switch to another encoding) is counted again.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kairox_core.context.counting import ProfileCounter
from kairox_core.context.rendering import assistant_message, tool_messages, user_message
from kairox_core.context.replies import ReplyView, render_replies
from kairox_core.context.sources import HistoryKind, HistoryUnit
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)

if TYPE_CHECKING:
    from kairox_core.store.base import EventLog, HistoryRow

CONVERSATION_TYPES = ("AssistantMessageCompleted", "ToolInvocationCompleted", "UserMessageAdded")
# Reverse pages grow from FIRST_PAGE to MAX_PAGE rows: small enough that the page where
# the budget runs out is mostly read for nothing only a little, large enough that a
# 128k-token window takes a handful of queries.
FIRST_PAGE = 64
MAX_PAGE = 256
MAX_BULK = 4096  # a page sized from a token estimate (a cold turn's window)


def image_marker(filename: str) -> str:
    return f"[Image dropped — was: {filename or 'unnamed'}]"


def history_user_message(
    text: str, attachments: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A user message as an older turn: images never travel again, only their marker,
    and a long document only its synopsis (the new prompt still carries them whole;
    see compaction/attachments.py and compaction/synopsis.py)."""
    images = [a for a in attachments if a.get("kind") == "image"]
    message = user_message(text, [_older(a) for a in attachments if a.get("kind") != "image"])
    if images:
        markers = "\n".join(
            image_marker(str(a.get("filename") or a.get("name") or "")) for a in images
        )
        message["content"] = f"{message['content']}\n\n{markers}"
    return message


def _older(att: Mapping[str, Any]) -> Mapping[str, Any]:
    synopsis = att.get("synopsis")
    if not isinstance(synopsis, str) or not synopsis.strip():
        return att
    name = att.get("filename") or att.get("name") or "unnamed"
    return {**att, "filename": f"{name} (synopsis; read whole when attached)", "text": synopsis}


def messages_for(type_name: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The chat message(s) a conversation event renders to in history."""
    if type_name == "UserMessageAdded":
        return (history_user_message(payload["text"], payload.get("attachments") or ()),)
    if type_name == "AssistantMessageCompleted":  # the model's own view: its tags kept
        return (assistant_message(payload.get("model_text") or payload["text"]),)
    if type_name == "ToolInvocationCompleted":
        return tool_messages(
            payload["tool_call_id"], payload["tool_name"], payload["arguments"], payload["result"]
        )
    raise ValueError(f"{type_name} is not a conversation event")


# by a history row's ``kind`` (event_rows.HISTORY_KINDS)
HISTORY_KINDS: tuple[HistoryKind, ...] = ("user", "assistant", "tool")
_KINDS: dict[str, HistoryKind] = {
    "UserMessageAdded": "user",
    "AssistantMessageCompleted": "assistant",
    "ToolInvocationCompleted": "tool",
}


def count_event(type_name: str, payload: Mapping[str, Any], pc: ProfileCounter) -> int:
    """Tokens the event's history message(s) cost under ``pc``, framing included."""
    return sum(pc.message(m) for m in messages_for(type_name, payload))


def with_tokens(event: Event, pc: ProfileCounter) -> Event:
    """The event with its token count filled in (call once, before appending it)."""
    if not isinstance(
        event, UserMessageAdded | AssistantMessageCompleted | ToolInvocationCompleted
    ):
        return event
    n = count_event(event.type, event.payload(), pc)
    return dataclasses.replace(event, tokens=n, token_counter=pc.key)


def unit_from(
    seq: int, type_name: str, payload: Mapping[str, Any], pc: ProfileCounter
) -> HistoryUnit:
    messages = messages_for(type_name, payload)
    tokens = payload.get("tokens")
    if tokens is None or payload.get("token_counter") != pc.key:
        tokens = sum(pc.message(m) for m in messages)
    return HistoryUnit(
        seq=seq,
        turn_id=str(payload.get("turn_id", "")),
        kind=_KINDS[type_name],
        messages=messages,
        tokens=int(tokens),
    )


def unit_from_event(event: Event, pc: ProfileCounter) -> HistoryUnit | None:
    if event.type not in _KINDS or event.seq is None:
        return None
    return unit_from(event.seq, event.type, event.payload(), pc)


def _unit_from_row(row: HistoryRow, pc: ProfileCounter) -> HistoryUnit:
    """A unit from a history row (``event_rows.HISTORY_COLUMNS``: plain columns)."""
    seq, kind, turn_id, tokens, extra, text = row
    if kind == 0:
        if extra:
            messages: tuple[dict[str, Any], ...] = (history_user_message(text, json.loads(extra)),)
        else:  # what history_user_message(text) gives, without its calls (most rows)
            messages = ({"role": "user", "content": text},)
    elif kind == 1:
        messages = ({"role": "assistant", "content": text},)
    else:
        assert extra is not None, "a tool row carries its call"
        call_id, tool, args = json.loads(extra)
        messages = tool_messages(call_id, tool, args, text)
    if tokens is None:  # not stored, or counted under another scheme
        tokens = sum(pc.message(m) for m in messages)
    return HistoryUnit(seq, turn_id or "", HISTORY_KINDS[kind], messages, int(tokens))


_ROLES = ("user", "assistant")
_new_unit = tuple.__new__  # HistoryUnit's own __new__ is a Python frame per unit


def _units_from_rows(rows: Sequence[HistoryRow], pc: ProfileCounter) -> list[HistoryUnit]:
    """``_unit_from_row`` for each row, the common case (a plain user or assistant
    message with its count stored) inline: a cold turn converts ~1,000 rows."""
    out: list[HistoryUnit] = []
    add = out.append
    for row in rows:
        seq, kind, turn_id, tokens, extra, text = row
        if extra is None and tokens is not None and kind != 2:
            message = {"role": _ROLES[kind], "content": text}
            add(
                _new_unit(
                    HistoryUnit, (seq, turn_id or "", HISTORY_KINDS[kind], (message,), tokens)
                )
            )
        else:
            add(_unit_from_row(row, pc))
    return out


class _Reader:
    """Paged reads of a session's conversation events (``EventStore.history_rows``)."""

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        counter: ProfileCounter,
        view: ReplyView | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.counter = counter
        self.view = view
        self.pages_read = 0
        self.rows_read = 0
        # the stored text of replies whose rendering may still change, by seq
        self.unsettled: dict[int, str] = {}

    def _units(self, rows: Sequence[HistoryRow]) -> list[HistoryUnit]:
        self.pages_read += 1
        self.rows_read += len(rows)
        return self.rendered(_units_from_rows(rows, self.counter))

    def rendered(
        self, units: list[HistoryUnit], originals: Mapping[int, str] | None = None
    ) -> list[HistoryUnit]:
        """``units`` with tagged replies as the view renders them (none: as stored);
        ``originals``: stored texts of units rendered before (``render_replies``)."""
        if self.view is None:
            return units
        units, unsettled = render_replies(
            units, self.view, self.session_id, self.counter, originals
        )
        self.unsettled.update(unsettled)
        return units

    def older(self, upper: int | None, size: int) -> list[HistoryRow]:
        """Up to ``size`` rows below seq ``upper`` (None: the newest), newest first, not
        decoded yet (``unit``): the rows of the page where the budget runs out are not."""
        rows = self.store.history_rows(
            self.session_id, below=upper, limit=size, counter_key=self.counter.key
        )
        self.pages_read += 1
        self.rows_read += len(rows)
        return rows

    def unit(self, row: HistoryRow) -> HistoryUnit:
        return _unit_from_row(row, self.counter)

    def newer(self, lower: int) -> list[HistoryUnit]:
        """Every unit above seq ``lower``, oldest first (what was added since)."""
        rows = self.store.history_rows(self.session_id, above=lower, counter_key=self.counter.key)
        return self._units(rows)


def _covered(seq: int, skip: list[tuple[int, int]]) -> int | None:
    """The first seq of the range (in ``skip``, descending) covering ``seq``, else None.
    Ranges wholly above ``seq`` are popped: callers walk seqs downwards."""
    while skip and skip[0][0] > seq:
        skip.pop(0)
    if skip and skip[0][0] <= seq <= skip[0][1]:
        return skip[0][0]
    return None


def _walk_older(
    reader: _Reader, upper: int | None, skip: list[tuple[int, int]]
) -> Iterator[HistoryUnit]:
    """Units below ``upper``, newest first, in growing reverse pages, jumping over
    summarised ranges without reading them. Stops at the start of the session."""
    size = FIRST_PAGE
    while True:
        rows = reader.older(upper, size)
        jumped = False
        page: list[HistoryUnit] = []
        for row in rows:
            seq = row[0]
            first = _covered(seq, skip)
            if first is not None:
                upper, jumped = first, True
                break
            if reader.view is None:  # decoded lazily: the last page is mostly not wanted
                yield reader.unit(row)
            else:  # rendered a page at a time: one look-up of its decisions
                page.append(reader.unit(row))
            upper = seq
        yield from reader.rendered(page)
        if not jumped and len(rows) < size:
            return
        size = min(size * 2, MAX_PAGE)


class EventHistory:
    """``HistorySource`` over an ``EventStore``'s events table (read-only queries).

    ``before_seq`` (exclusive) hides the new prompt's own event; ``skip`` lists inclusive
    seq ranges replaced by compaction summaries.
    """

    def __init__(
        self,
        store: EventLog,
        session_id: str,
        counter: ProfileCounter,
        *,
        before_seq: int | None = None,
        skip: Sequence[tuple[int, int]] = (),
        view: ReplyView | None = None,
    ) -> None:
        self._reader = _Reader(store, session_id, counter, view)
        self.before_seq = before_seq
        self.skip = sorted(skip, reverse=True)

    @property
    def pages_read(self) -> int:
        return self._reader.pages_read

    @property
    def rows_read(self) -> int:
        return self._reader.rows_read

    def newest_first(self) -> Iterator[HistoryUnit]:
        return _walk_older(self._reader, self.before_seq, list(self.skip))


def _covering(seq: int, skip: Sequence[tuple[int, int]]) -> int | None:
    """The first seq of the range in ``skip`` covering ``seq``, else None (no popping:
    the cache checks seqs in any order)."""
    for first, last in skip:
        if first <= seq <= last:
            return first
    return None


class HistoryCache:
    """The recent end of one session's history, kept between turns by its session.

    A turn then reads from the database only what was appended since the last turn
    (by any process) and, if the budget reaches further back than the cache, older
    reverse pages. Valid because events are append-only and summaries only ever widen
    what they replace. ``trim`` bounds it to about what a turn can include. With a
    ``view`` (``[memory] history_decided``), a reply whose memory tags wait for a
    person is rendered again each turn until they are decided (``_settle``).

    Units are kept oldest first with running token sums (``sums[i]``: the tokens of
    ``units[:i]`` plus a base), so the newest units that fit a budget are found by
    bisection, not by walking them: a warm turn's history costs next to nothing
    whatever its length, and a cold one reads about the rows it needs (the page size
    is estimated from the tokens per unit read so far).
    """

    def __init__(self, store: EventLog, session_id: str, view: ReplyView | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.view = view  # how tagged replies read (None: as stored)
        # the stored text of cached replies whose rendering may still change, by seq
        self.unsettled: dict[int, str] = {}
        self.counter_key: str | None = None
        self.units: list[HistoryUnit] = []  # oldest first, none covered by ``skip``
        self.sums: list[int] = [0]
        self.skip: list[tuple[int, int]] = []  # the ranges ``units`` were filtered with
        self.high = 0  # every unit up to here has been seen
        self.started = False  # False until the first read from the top
        self.at_start = False  # the cache reaches back to the session's first event
        self.below: int | None = None  # where the next older read starts (None: the top)
        self.reader: _Reader | None = None
        self._page = FIRST_PAGE  # the next page's size when no estimate is given

    @property
    def desc(self) -> list[HistoryUnit]:
        """The cached units, newest first."""
        return self.units[::-1]

    def source(
        self,
        counter: ProfileCounter,
        *,
        before_seq: int | None = None,
        skip: Sequence[tuple[int, int]] = (),
    ) -> CachedHistory:
        """Newest first, like ``EventHistory.newest_first``, served from the cache; reads
        what was appended since the last call now, older pages when asked for."""
        if self.counter_key != counter.key:
            self._reset()
            self.counter_key = counter.key
        self.reader = _Reader(self.store, self.session_id, counter, self.view)
        self.reader.unsettled = self.unsettled
        self._page = FIRST_PAGE
        ranges = sorted(skip, reverse=True)
        if ranges != self.skip:
            if not all(
                _covering(a, ranges) == _covering(b, ranges) is not None for a, b in self.skip
            ):
                self._reset()  # a range no longer replaced: its units were never kept
            self.skip = ranges
            if ranges and self.units:
                self._replace([u for u in self.units if _covering(u.seq, ranges) is None])
        if self.unsettled:
            self._settle()
        if self.started:
            new = self.reader.newer(self.high)
            if new:
                self.high = new[-1].seq
                if ranges:
                    new = [u for u in new if _covering(u.seq, ranges) is None]
                total = self.sums[-1]
                for unit in new:
                    total += unit.tokens
                    self.sums.append(total)
                self.units.extend(new)
        return CachedHistory(self, before_seq)

    def _settle(self) -> None:
        """Render again the cached replies whose memory proposals were pending when
        they were read: a person may have decided them since (any process)."""
        assert self.reader is not None
        stored, self.unsettled = self.unsettled, {}
        self.reader.unsettled = self.unsettled
        at = [i for i, u in enumerate(self.units) if u.seq in stored]
        if not at:
            return
        before = [self.units[i] for i in at]
        after = self.reader.rendered(before, {u.seq: stored[u.seq] for u in before})
        if after != before:
            units = list(self.units)
            for i, unit in zip(at, after, strict=True):
                units[i] = unit
            self._replace(units)

    def _reset(self) -> None:
        self.units, self.sums, self.skip = [], [0], []
        self.unsettled.clear()
        self.started = self.at_start = False
        self.high, self.below, self._page = 0, None, FIRST_PAGE

    def _replace(self, units: list[HistoryUnit]) -> None:
        self.units = units
        self.sums = [0, *itertools.accumulate(u.tokens for u in units)]

    def end(self, before_seq: int | None) -> int:
        """How many cached units (oldest first) lie below ``before_seq``."""
        n = len(self.units)
        if before_seq is not None:
            while n and self.units[n - 1].seq >= before_seq:
                n -= 1
        return n

    def extend_older(self, want_tokens: int | None = None) -> int:
        """Read one page of older units into the cache; how many were added (0: none
        left, ``at_start`` is set). ``want_tokens``: about how many tokens are still
        wanted, to size the page; None: pages grow from FIRST_PAGE to MAX_PAGE."""
        assert self.reader is not None
        if self.at_start:
            return 0
        if want_tokens is not None and self.units:
            per_unit = max(1.0, (self.sums[-1] - self.sums[0]) / len(self.units))
            size = max(FIRST_PAGE, min(MAX_BULK, int(want_tokens / per_unit * 1.1) + 8))
        else:
            size = self._page
            self._page = min(self._page * 2, MAX_PAGE)
        rows = self.reader.older(self.below, size)
        if not self.started:
            self.started = True
            self.high = rows[0][0] if rows else 0
        skip, unit = self.skip, self.reader.unit
        jumped: int | None = None
        if not skip:
            older = _units_from_rows(rows, self.reader.counter)
        else:
            older = []
            for row in rows:
                jumped = _covering(row[0], skip)
                if jumped is not None:
                    break
                older.append(unit(row))
        older = self.reader.rendered(older)
        if older:
            self.below = older[-1].seq
        if jumped is not None:
            self.below = jumped
        elif len(rows) < size:
            self.at_start = True
        if older:
            older.reverse()
            base = self.sums[0] - sum(u.tokens for u in older)
            self.sums[:1] = itertools.accumulate((u.tokens for u in older), initial=base)
            self.units[:0] = older
        elif jumped is not None:
            return self.extend_older(want_tokens)
        return len(older)

    def trim(self, keep_tokens: int) -> None:
        """Forget the oldest cached units beyond ``keep_tokens`` (re-read if needed):
        the newest units up to the first one past ``keep_tokens`` stay."""
        total = self.sums[-1]
        i = bisect.bisect_left(self.sums, total - keep_tokens) - 1
        if i > 0:
            del self.units[:i]
            del self.sums[:i]
            self.below = self.units[0].seq
            self.at_start = False


class CachedHistory:
    """One turn's view of a ``HistoryCache``: newest first below ``before_seq``
    (iterate it, or ``newest_first()``), and ``within(room)`` for the assembler."""

    def __init__(self, cache: HistoryCache, before_seq: int | None) -> None:
        self.cache = cache
        self.before_seq = before_seq

    def newest_first(self) -> Iterator[HistoryUnit]:
        return iter(self)

    def __iter__(self) -> Iterator[HistoryUnit]:
        cache, before = self.cache, self.before_seq
        bottom = cache.units[0].seq if cache.units else None
        yield from reversed(cache.units[: cache.end(before)])
        while (cache.units[0].seq if cache.units else None) == bottom:
            if cache.at_start:
                return
            older = cache.units[: cache.extend_older()]
            bottom = cache.units[0].seq if cache.units else None
            yield from (u for u in reversed(older) if before is None or u.seq < before)
        # The cache changed while this iteration was suspended (a trim, another view):
        # the rest comes straight from the store.
        assert cache.reader is not None
        upper = bottom if bottom is not None else before
        yield from _walk_older(cache.reader, upper, list(cache.skip))

    def within(self, room: int) -> tuple[list[HistoryUnit], HistoryUnit | None]:
        """The newest units whose tokens add up to at most ``room`` (newest first) and
        the first unit that did not fit (None: the history ran out), as walking
        ``newest_first()`` and stopping at the first that does not fit gives."""
        cache = self.cache
        while True:
            n = cache.end(self.before_seq)
            sums = cache.sums
            j = min(bisect.bisect_left(sums, sums[n] - room, 0, n + 1), n)
            if j > 0 or cache.at_start:
                taken = cache.units[j:n]
                taken.reverse()
                return taken, cache.units[j - 1] if j > 0 else None
            cache.extend_older(room - (sums[n] - sums[0]))


def event_messages(event: Event) -> tuple[dict[str, Any], ...]:
    """The chat messages a conversation event (a user or assistant message, a tool call
    with its result) stands for in history, as the assembler renders them; none for any
    other event."""
    if event.type not in _KINDS:
        return ()
    return messages_for(event.type, event.payload())
