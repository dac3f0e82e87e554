"""History from the event store, newest first, in reverse pages, with cached counts.

Reading the whole session each turn would make a turn cost grow with session length.
Instead we read the conversation events backwards a page at a time (the assembler stops
pulling when the budget is full), skip seq ranges a compaction summary replaced, and
use the token count stored in each event when it was written; only an event counted
under another scheme (a profile switch to another encoding) is counted again.
"""

from __future__ import annotations

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
FIRST_PAGE = 64
MAX_PAGE = 2048


def messages_for(type_name: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The chat message(s) a conversation event renders to in history."""
    if type_name == "UserMessageAdded":
        return (user_message(payload["text"], payload.get("attachments") or ()),)
    if type_name == "AssistantMessageCompleted":
        return (assistant_message(payload["text"]),)
    if type_name == "ToolInvocationCompleted":
        return tool_messages(payload["tool_call_id"], payload["tool_name"],
                             payload["arguments"], payload["result"])
    raise ValueError(f"{type_name} is not a conversation event")


_KINDS: dict[str, HistoryKind] = {
    "UserMessageAdded": "user", "AssistantMessageCompleted": "assistant",
    "ToolInvocationCompleted": "tool",
}


def count_event(type_name: str, payload: Mapping[str, Any], pc: ProfileCounter) -> int:
    """Tokens the event's history message(s) cost under ``pc``, framing included."""
    return sum(pc.message(m) for m in messages_for(type_name, payload))


def with_tokens(event: Event, pc: ProfileCounter) -> Event:
    """The event with its token count filled in (call once, before appending it)."""
    import dataclasses

    if not isinstance(event, UserMessageAdded | AssistantMessageCompleted
                      | ToolInvocationCompleted):
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
    return HistoryUnit(seq=seq, turn_id=str(payload.get("turn_id", "")),
                       kind=_KINDS[type_name], messages=messages, tokens=int(tokens))


def unit_from_event(event: Event, pc: ProfileCounter) -> HistoryUnit | None:
    if event.type not in _KINDS or event.seq is None:
        return None
    return unit_from(event.seq, event.type, event.payload(), pc)


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
        self.store = store
        self.session_id = session_id
        self.counter = counter
        self.before_seq = before_seq
        self.skip = sorted(skip, reverse=True)
        self.pages_read = 0
        self.rows_read = 0

    def _page(self, upper: int | None, size: int) -> list[Any]:
        sql = (
            "SELECT seq, type, data FROM events WHERE session_id = ? AND type IN (?, ?, ?)"
        )
        params: list[Any] = [self.session_id, *CONVERSATION_TYPES]
        if upper is not None:
            sql += " AND seq < ?"
            params.append(upper)
        sql += " ORDER BY seq DESC LIMIT ?"
        params.append(size)
        with self.store.db.lock:
            rows: list[Any] = self.store.db.conn.execute(sql, params).fetchall()
        self.pages_read += 1
        self.rows_read += len(rows)
        return rows

    def newest_first(self) -> Iterator[HistoryUnit]:
        upper = self.before_seq
        skip = list(self.skip)
        size = FIRST_PAGE
        while True:
            rows = self._page(upper, size)
            jumped = False
            for seq, type_name, data in rows:
                while skip and skip[0][0] > seq:
                    skip.pop(0)  # a range wholly above us: already passed
                if skip and skip[0][0] <= seq <= skip[0][1]:
                    upper = skip.pop(0)[0]  # jump below the summarised range
                    jumped = True
                    break
                payload = json.loads(data)["payload"]
                yield unit_from(seq, type_name, payload, self.counter)
                upper = seq
            if not jumped and len(rows) < size:
                return
            size = min(size * 2, MAX_PAGE)
