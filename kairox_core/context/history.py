"""History from the event store, newest first, in reverse pages, with cached counts.

Reading the whole session each turn would make a turn cost grow with session length.
Instead we read the conversation events backwards a page at a time (the assembler stops
pulling when the budget is full), skip seq ranges a compaction summary replaced, and
use the token count stored in each event when it was written; only an event counted
under another scheme (a profile switch to another encoding) is counted again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kairox_core.context.counting import ProfileCounter
from kairox_core.context.rendering import assistant_message, tool_messages, user_message
from kairox_core.context.sources import HistoryKind, HistoryUnit
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)

CONVERSATION_TYPES = ("AssistantMessageCompleted", "ToolInvocationCompleted", "UserMessageAdded")
# Reverse pages grow from FIRST_PAGE to MAX_PAGE rows: small enough that the page where
# the budget runs out is mostly read for nothing only a little, large enough that a
# 128k-token window takes a handful of queries.
FIRST_PAGE = 64
MAX_PAGE = 256


def image_marker(filename: str) -> str:
    return f"[Image dropped — was: {filename or 'unnamed'}]"


def history_user_message(
    text: str, attachments: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A user message as an older turn: images never travel again, only their marker
    (the new prompt still carries them; see compaction/attachments.py)."""
    images = [a for a in attachments if a.get("kind") == "image"]
    message = user_message(text, [a for a in attachments if a.get("kind") != "image"])
    if images:
        markers = "\n".join(
            image_marker(str(a.get("filename") or a.get("name") or "")) for a in images
        )
        message["content"] = f"{message['content']}\n\n{markers}"
    return message


def messages_for(type_name: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The chat message(s) a conversation event renders to in history."""
    if type_name == "UserMessageAdded":
        return (history_user_message(payload["text"], payload.get("attachments") or ()),)
    if type_name == "AssistantMessageCompleted":
        return (assistant_message(payload["text"]),)
    if type_name == "ToolInvocationCompleted":
        return tool_messages(
            payload["tool_call_id"], payload["tool_name"], payload["arguments"], payload["result"]
        )
    raise ValueError(f"{type_name} is not a conversation event")


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


def _unit_from_row(row: Any, pc: ProfileCounter) -> HistoryUnit:
    """A unit from the columns SQLite extracted (cheaper than parsing whole events)."""
    seq, type_name, turn_id, text, atts, call_id, tool, args, result, tokens, scheme = row
    if type_name == "UserMessageAdded":
        if atts and atts != "[]":
            messages: tuple[dict[str, Any], ...] = (history_user_message(text, json.loads(atts)),)
        else:  # what history_user_message(text) gives, without its calls (most rows)
            messages = ({"role": "user", "content": text},)
    elif type_name == "AssistantMessageCompleted":
        messages = (assistant_message(text),)
    else:
        messages = tool_messages(call_id, tool, args, result)
    if tokens is None or scheme != pc.key:
        tokens = sum(pc.message(m) for m in messages)
    return HistoryUnit(
        seq=seq,
        turn_id=turn_id or "",
        kind=_KINDS[type_name],
        messages=messages,
        tokens=int(tokens),
    )


class _Reader:
    """Paged reads of a session's conversation events (``EventStore.history_rows``)."""

    def __init__(self, store: Any, session_id: str, counter: ProfileCounter) -> None:
        self.store = store
        self.session_id = session_id
        self.counter = counter
        self.pages_read = 0
        self.rows_read = 0

    def _units(self, rows: Sequence[Any]) -> list[HistoryUnit]:
        self.pages_read += 1
        self.rows_read += len(rows)
        return [_unit_from_row(r, self.counter) for r in rows]

    def older(self, upper: int | None, size: int) -> list[tuple[Any, ...]]:
        """Up to ``size`` rows below seq ``upper`` (None: the newest), newest first, not
        decoded yet (``unit``): the rows of the page where the budget runs out are not."""
        rows: list[tuple[Any, ...]] = self.store.history_rows(
            self.session_id, below=upper, limit=size
        )
        self.pages_read += 1
        self.rows_read += len(rows)
        return rows

    def unit(self, row: Sequence[Any]) -> HistoryUnit:
        return _unit_from_row(row, self.counter)

    def newer(self, lower: int) -> list[HistoryUnit]:
        """Every unit above seq ``lower``, oldest first (what was added since)."""
        return self._units(self.store.history_rows(self.session_id, above=lower))


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
        for row in rows:
            seq = row[0]
            first = _covered(seq, skip)
            if first is not None:
                upper, jumped = first, True
                break
            yield reader.unit(row)
            upper = seq
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
        store: Any,
        session_id: str,
        counter: ProfileCounter,
        *,
        before_seq: int | None = None,
        skip: Sequence[tuple[int, int]] = (),
    ) -> None:
        self._reader = _Reader(store, session_id, counter)
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


class HistoryCache:
    """The recent end of one session's history, kept between turns by its session.

    A turn then reads from the database only what was appended since the last turn
    (by any process) and, if the budget reaches further back than the cache, older
    reverse pages. Valid because events are append-only and summaries only ever widen
    what they replace. ``trim`` bounds it to about what a turn can include.
    """

    def __init__(self, store: Any, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.counter_key: str | None = None
        self.desc: list[HistoryUnit] = []  # newest first
        self.high = 0  # every unit up to here has been seen
        self.started = False  # False until the first read from the top
        self.at_start = False  # the cache reaches back to the session's first event
        self.reader: _Reader | None = None

    def source(
        self,
        counter: ProfileCounter,
        *,
        before_seq: int | None = None,
        skip: Sequence[tuple[int, int]] = (),
    ) -> Iterator[HistoryUnit]:
        """Newest first, like ``EventHistory.newest_first``, served from the cache."""
        if self.counter_key != counter.key:
            self.desc, self.started, self.at_start, self.high = [], False, False, 0
            self.counter_key = counter.key
        self.reader = _Reader(self.store, self.session_id, counter)
        if self.started:
            new = self.reader.newer(self.high)
            if new:
                self.desc[:0] = reversed(new)
                self.high = new[-1].seq
        return self._iterate(before_seq, sorted(skip, reverse=True))

    def _iterate(
        self, before_seq: int | None, skip: list[tuple[int, int]]
    ) -> Iterator[HistoryUnit]:
        assert self.reader is not None
        lowest: int | None = None
        for unit in list(self.desc):
            lowest = unit.seq
            if before_seq is not None and unit.seq >= before_seq:
                continue
            if _covered(unit.seq, skip) is not None:
                continue
            yield unit
        if self.at_start and self.started:
            return
        upper = lowest if self.started else before_seq
        if not self.started and before_seq is None:
            upper = None
        fetched_from_top = not self.started
        self.started = True
        for unit in _walk_older(self.reader, upper, list(skip)):
            self.desc.append(unit)
            if fetched_from_top and unit.seq > self.high:
                self.high = unit.seq
            yield unit
        else:
            self.at_start = True

    def trim(self, keep_tokens: int) -> None:
        """Forget the oldest cached units beyond ``keep_tokens`` (re-read if needed)."""
        total = 0
        for i, unit in enumerate(self.desc):
            total += unit.tokens
            if total > keep_tokens:
                del self.desc[i + 1 :]
                self.at_start = False
                return
