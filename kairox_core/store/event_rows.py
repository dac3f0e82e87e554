"""What every event-log backend decides the same way, whatever its SQL dialect.

The SQLite ``EventStore`` and the PostgreSQL plugin keep their own SQL; the rules
around it live here once: which batches are valid, how a stored row becomes an
``Event`` (or a ``SessionInfo``, a planning ``Row``), how a batch's
lifecycle events change its sessions' rows, and when a compaction counts as running.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kairox_core.events import (
    Event,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    event_from_dict,
)
from kairox_core.store.base import Row, SessionInfo

# The events a conversation's history is made of, and those compaction state folds.
CONVERSATION_TYPES = ("AssistantMessageCompleted", "ToolInvocationCompleted", "UserMessageAdded")
COMPACTION_EVENT_TYPES = (
    "FactPinned",
    "FactUnpinned",
    "CompactionSummary",
    "SummaryEdited",
    "ChunkDropped",
)
# A history row, as every backend's ``history_rows`` returns it: ``kind`` indexes
# ``HISTORY_KINDS``; ``tokens`` is the stored count when it was made under the counting
# scheme asked for, else None; ``extra`` is JSON or None: a user message's attachments
# (None when there are none), a tool's ``[tool_call_id, tool_name, arguments]``;
# ``text`` is the message text (a tool's: its result).
HISTORY_COLUMNS = ("seq", "kind", "turn_id", "tokens", "extra", "text")
HISTORY_KINDS = ("user", "assistant", "tool")
COMPACTION_RUN_TYPES = (
    "ContextCompactionStarted",
    "ContextCompactionCompleted",
    "ContextCompactionFailed",
)


def checked_batch(events: Iterable[Event]) -> list[Event]:
    """``events`` as a list, refused whole (nothing written) if any is not appendable."""
    batch = list(events)
    for event in batch:
        if not isinstance(event, Event):
            raise TypeError(f"expected an Event, got {type(event).__name__}")
        if not isinstance(event.session_id, str) or not event.session_id:
            raise ValueError("an event needs a non-empty session_id")
    return batch


def event_from_row(data: str | bytes | Mapping[str, Any]) -> Event:
    """An event from its stored JSON: text (SQLite) or already decoded (JSONB)."""
    return event_from_dict(json.loads(data) if isinstance(data, str | bytes) else dict(data))


def wanted_types(types: str | Iterable[str]) -> list[str]:
    """A ``types`` filter as a sorted list (one name counts as one type, not letters)."""
    return sorted({types} if isinstance(types, str) else set(types))


def planning_row(seq: Any, type_: Any, turn_id: Any, tokens: Any) -> Row:
    """A ``Row`` from the four light columns (missing turn or tokens: '' and 0)."""
    return Row(int(seq), str(type_), str(turn_id or ""), int(tokens or 0))


def skip_leading(
    skip: Sequence[tuple[int, int]], first_seq: int | None, first_stored: int | None
) -> tuple[int | None, list[tuple[int, int]]]:
    """``(first_seq, skip)`` with a skipped range covering the session's first
    conversation event turned into a lower bound, so that stretch is never scanned."""
    ranges = sorted(skip)
    if ranges and first_seq is None and first_stored is not None and ranges[0][0] <= first_stored:
        return ranges[0][1] + 1, ranges[1:]
    return first_seq, ranges


def compaction_running_seq(latest: Mapping[str, int]) -> int | None:
    """The rule behind ``compaction_running``: given the highest seq of each run event
    type, the Started seq when no Completed/Failed came after it, else None."""
    started = latest.get("ContextCompactionStarted")
    if started is None:
        return None
    ended = max((s for t, s in latest.items() if t != "ContextCompactionStarted"), default=0)
    return None if ended > started else started


def session_info(row: Any) -> SessionInfo:
    """A ``SessionInfo`` from a ``sessions`` row with its columns by name (any backend's)."""
    return SessionInfo(
        session_id=row["session_id"],
        workspace_id=row["workspace_id"],
        profile=row["profile"],
        created_at=float(row["created_at"]),
        last_seq=int(row["last_seq"]),
        event_count=int(row["event_count"]),
        archived_at=row["archived_at"],
    )


def indexed_stretch(low: Any, last: Any) -> tuple[int, int]:
    """A ``recall_progress`` row as ``(low, last)`` (an old row without low: 0)."""
    return (int(low) if low is not None else 0), int(last)


@dataclass
class SessionChanges:
    """What one batch does to one session's row: how many events, when the row was
    first seen, and the lifecycle fields it sets (in batch order: the last one wins)."""

    first_at: float
    count: int = 0
    set_workspace: bool = False
    workspace_id: str | None = None
    set_profile: bool = False
    profile: str | None = None
    set_created: bool = False
    created_at: float | None = None
    set_archived: bool = False
    archived_at: float | None = None
    events: list[Event] = field(default_factory=list)

    def add(self, event: Event) -> None:
        self.count += 1
        self.events.append(event)
        if isinstance(event, SessionStarted):
            self.set_workspace, self.workspace_id = True, event.workspace_id
            self.set_profile, self.profile = True, event.profile
            self.set_created, self.created_at = True, event.created_at
        elif isinstance(event, ProfileSwitched):
            self.set_profile, self.profile = True, event.to_profile
        elif isinstance(event, SessionArchived):
            self.set_archived, self.archived_at = True, event.created_at


def session_changes(batch: Sequence[Event]) -> dict[str, SessionChanges]:
    """Each session's ``SessionChanges`` for a batch, sessions sorted (writers that
    lock several sessions' rows take them in one order, so they never deadlock)."""
    out: dict[str, SessionChanges] = {}
    for event in batch:
        changes = out.get(event.session_id)
        if changes is None:
            changes = out[event.session_id] = SessionChanges(first_at=event.created_at)
        changes.add(event)
    return dict(sorted(out.items()))


__all__ = [
    "COMPACTION_EVENT_TYPES",
    "COMPACTION_RUN_TYPES",
    "CONVERSATION_TYPES",
    "HISTORY_COLUMNS",
    "HISTORY_KINDS",
    "Row",
    "SessionChanges",
    "SessionInfo",
    "checked_batch",
    "compaction_running_seq",
    "event_from_row",
    "indexed_stretch",
    "planning_row",
    "session_changes",
    "session_info",
    "skip_leading",
    "wanted_types",
]
