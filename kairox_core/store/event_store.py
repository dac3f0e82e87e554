"""The append-only event store: every state change of every session, in order.

Each event is one row: ``(session_id, seq)`` unique, its type, its schema version and its
JSON. Sequence numbers are assigned inside ``BEGIN IMMEDIATE``, which holds SQLite's
write lock, so two processes appending to one session never duplicate or lose a seq; a
crash before ``COMMIT`` leaves nothing behind. Triggers refuse UPDATE and DELETE on the
events table: history is never rewritten (compaction adds summaries, it removes nothing).

A ``sessions`` table is kept alongside for listing: a row appears with a session's first
event; ``SessionStarted`` fills in its workspace and profile, ``ProfileSwitched`` and
``SessionArchived`` update it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.events import (
    Event,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    event_from_dict,
)
from kairox_core.store.database import Database, DatabaseStore

COMPONENT = "events"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL CHECK (seq > 0),
        type TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at REAL NOT NULL,
        data TEXT NOT NULL CHECK (json_valid(data)),
        UNIQUE (session_id, seq)
    );
    CREATE INDEX events_by_type ON events (session_id, type, seq);
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the event store is append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the event store is append-only'); END;
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        workspace_id TEXT,
        profile TEXT,
        created_at REAL NOT NULL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        event_count INTEGER NOT NULL DEFAULT 0,
        archived_at REAL
    );
    CREATE INDEX sessions_by_workspace ON sessions (workspace_id, created_at);
    """,
)


@dataclass(frozen=True)
class SessionInfo:
    """One row of the session list. ``workspace_id``/``profile`` are None until started."""

    session_id: str
    workspace_id: str | None
    profile: str | None
    created_at: float
    last_seq: int
    event_count: int
    archived_at: float | None = None

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "profile": self.profile,
            "created_at": self.created_at,
            "last_seq": self.last_seq,
            "event_count": self.event_count,
            "archived": self.archived,
            "archived_at": self.archived_at,
        }


def _emit(events: Sequence[Event]) -> Callable[[], None]:
    def run() -> None:
        from kairox_core.plugins import get_plugins

        host = get_plugins()
        for event in events:
            host.emit(event)

    return run


class EventStore(DatabaseStore):
    """Append and read events. ``EventStore(path)`` opens the file; pass a ``Database``
    (or a connection from ``kairox_core.store.connect``) to share it with other stores."""

    def __init__(self, path_or_conn: str | os.PathLike[str] | Database | Any) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)

    # --- writing -------------------------------------------------------------------

    def append(self, event: Event) -> Event:
        """Store one event; returns it with ``seq`` assigned."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[Event]) -> list[Event]:
        """Store events atomically (all or none), each with the next seq of its session."""
        batch = list(events)
        stored: list[Event] = []
        if not batch:
            return stored
        with self.db.atomic() as conn:
            heads: dict[str, int] = {}
            counts: dict[str, int] = {}
            for event in batch:
                if not isinstance(event, Event):
                    raise TypeError(f"expected an Event, got {type(event).__name__}")
                sid = event.session_id
                if not isinstance(sid, str) or not sid:
                    raise ValueError("an event needs a non-empty session_id")
                if sid not in heads:
                    row = conn.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (sid,)
                    ).fetchone()
                    heads[sid] = int(row[0])
                    counts[sid] = 0
                heads[sid] += 1
                counts[sid] += 1
                event = event.with_seq(heads[sid])
                self._insert(conn, event)
                if counts[sid] == 1:  # the row must exist before a lifecycle update
                    self._track_session(conn, event, 1)
                    counts[sid] = 0
                if isinstance(event, SessionStarted | ProfileSwitched | SessionArchived):
                    self._track_lifecycle(conn, event)
                stored.append(event)
            for sid, n in counts.items():
                if n:
                    conn.execute(
                        "UPDATE sessions SET last_seq = ?, event_count = event_count + ? "
                        "WHERE session_id = ?",
                        (heads[sid], n, sid),
                    )
            self.db.after_commit(_emit(tuple(stored)))
        return stored

    def _insert(self, conn: Any, event: Event) -> None:
        data = event.to_dict()
        conn.execute(
            "INSERT INTO events (session_id, seq, type, version, created_at, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                event.session_id,
                event.seq,
                event.type,
                int(data["version"]),
                event.created_at,
                json.dumps(data, ensure_ascii=False, separators=(",", ":")),
            ),
        )

    def _track_session(self, conn: Any, event: Event, n: int) -> None:
        conn.execute(
            "INSERT INTO sessions (session_id, created_at, last_seq, event_count) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "last_seq = excluded.last_seq, event_count = event_count + excluded.event_count",
            (event.session_id, event.created_at, event.seq, n),
        )

    def _track_lifecycle(self, conn: Any, event: Event) -> None:
        if isinstance(event, SessionStarted):
            conn.execute(
                "UPDATE sessions SET workspace_id = ?, profile = ?, created_at = ? "
                "WHERE session_id = ?",
                (event.workspace_id, event.profile, event.created_at, event.session_id),
            )
        elif isinstance(event, ProfileSwitched):
            conn.execute(
                "UPDATE sessions SET profile = ? WHERE session_id = ?",
                (event.to_profile, event.session_id),
            )
        elif isinstance(event, SessionArchived):
            conn.execute(
                "UPDATE sessions SET archived_at = ? WHERE session_id = ?",
                (event.created_at, event.session_id),
            )

    # --- reading -------------------------------------------------------------------

    def read(
        self,
        session_id: str,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Event]:
        """The session's events in seq order, optionally a seq range (inclusive) and types."""
        sql = "SELECT data FROM events WHERE session_id = ?"
        params: list[Any] = [session_id]
        if first_seq is not None:
            sql += " AND seq >= ?"
            params.append(first_seq)
        if last_seq is not None:
            sql += " AND seq <= ?"
            params.append(last_seq)
        if types is not None:
            wanted = sorted({types} if isinstance(types, str) else set(types))
            if not wanted:
                return []
            sql += f" AND type IN ({','.join('?' * len(wanted))})"
            params.extend(wanted)
        sql += " ORDER BY seq"
        with self.db.lock:
            rows = self.db.conn.execute(sql, params).fetchall()
        return [event_from_dict(json.loads(row[0])) for row in rows]

    def last_seq(self, session_id: str) -> int:
        """The highest seq stored for the session; 0 when it has no events."""
        with self.db.lock:
            row = self.db.conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row[0])

    def sessions(
        self, *, workspace_id: str | None = None, include_archived: bool = True
    ) -> list[SessionInfo]:
        """Every session (or one workspace's), oldest first."""
        sql = "SELECT * FROM sessions WHERE 1 = 1"
        params: list[Any] = []
        if workspace_id is not None:
            sql += " AND workspace_id = ?"
            params.append(workspace_id)
        if not include_archived:
            sql += " AND archived_at IS NULL"
        sql += " ORDER BY created_at, session_id"
        with self.db.lock:
            rows = self.db.conn.execute(sql, params).fetchall()
        return [_session_info(row) for row in rows]

    def get_session(self, session_id: str) -> SessionInfo | None:
        with self.db.lock:
            row = self.db.conn.execute(
                "SELECT * FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return _session_info(row) if row is not None else None


def _session_info(row: Any) -> SessionInfo:
    return SessionInfo(
        session_id=row["session_id"],
        workspace_id=row["workspace_id"],
        profile=row["profile"],
        created_at=row["created_at"],
        last_seq=row["last_seq"],
        event_count=row["event_count"],
        archived_at=row["archived_at"],
    )
