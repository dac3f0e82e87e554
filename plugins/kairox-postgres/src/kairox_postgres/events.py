"""The append-only event log on PostgreSQL (the ``EventLog`` protocol).

A seq is assigned under the row lock of the session's ``sessions`` row, taken by an
``INSERT ... ON CONFLICT DO UPDATE`` in the appending transaction (the upsert of the
counter row, which locks it like ``SELECT ... FOR UPDATE``): writers to one session
queue on that row (on any host), each reads the head its predecessor committed, and a
crash before ``COMMIT`` releases the lock with nothing written. Writers to different sessions
never wait for each other. Rows are ``(session_id, seq)`` unique and triggers refuse
UPDATE, DELETE and TRUNCATE: history is never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from psycopg.types.json import Jsonb

from kairox_core.events import (
    Event,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    event_from_dict,
)
from kairox_core.store.event_store import (
    COMPACTION_EVENT_TYPES,
    CONVERSATION_TYPES,
    Row,
    SessionInfo,
)
from kairox_postgres.db import PgDatabase

_P = "data -> 'payload'"
_HISTORY_COLUMNS = (
    f"seq, type, {_P} ->> 'turn_id' AS turn_id, {_P} ->> 'text' AS text, "
    f"({_P} -> 'attachments')::text AS attachments, {_P} ->> 'tool_call_id' AS call_id, "
    f"{_P} ->> 'tool_name' AS tool, {_P} ->> 'arguments' AS arguments, "
    f"{_P} ->> 'result' AS result, ({_P} ->> 'tokens')::bigint AS tokens, "
    f"{_P} ->> 'token_counter' AS token_counter"
)
_CONVERSATION = "type = ANY(%s)"


def _emit(events: Sequence[Event]) -> Callable[[], None]:
    def run() -> None:
        from kairox_core.plugins import get_plugins

        host = get_plugins()
        for event in events:
            host.emit(event)

    return run


class PgEventLog:
    """Append and read events; every method is one short transaction or one query."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    # --- writing -------------------------------------------------------------------

    def append(self, event: Event) -> Event:
        """Store one event; returns it with ``seq`` assigned."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[Event]) -> list[Event]:
        """Store events atomically (all or none), each with the next seq of its session."""
        batch = list(events)
        if not batch:
            return []
        for event in batch:
            if not isinstance(event, Event):
                raise TypeError(f"expected an Event, got {type(event).__name__}")
            if not isinstance(event.session_id, str) or not event.session_id:
                raise ValueError("an event needs a non-empty session_id")
        stored: list[Event] = []
        with self.db.atomic() as conn:
            first_at: dict[str, float] = {}
            counts: dict[str, int] = {}
            for event in batch:
                first_at.setdefault(event.session_id, event.created_at)
                counts[event.session_id] = counts.get(event.session_id, 0) + 1
            heads: dict[str, int] = {}
            # One statement per session creates or locks its counter row, reserves the
            # batch's seqs and returns the head before them. Sorted: batches spanning
            # the same sessions lock them in one order, so they never deadlock.
            for sid in sorted(first_at):
                row = conn.execute(
                    "INSERT INTO sessions AS s (session_id, created_at, last_seq, event_count) "
                    "VALUES (%(sid)s, %(at)s, %(n)s, %(n)s) ON CONFLICT (session_id) DO UPDATE "
                    "SET last_seq = s.last_seq + %(n)s, event_count = s.event_count + %(n)s "
                    "RETURNING s.last_seq - %(n)s AS head",
                    {"sid": sid, "at": first_at[sid], "n": counts[sid]},
                ).fetchone()
                assert row is not None  # RETURNING always yields the row
                heads[sid] = int(row["head"])
            rows: list[tuple[Any, ...]] = []
            for event in batch:
                sid = event.session_id
                heads[sid] += 1
                event = event.with_seq(heads[sid])
                data = event.to_dict()
                version = int(data["version"])
                rows.append((sid, event.seq, event.type, version, event.created_at, Jsonb(data)))
                stored.append(event)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO events (session_id, seq, type, version, created_at, data) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    rows,
                )
            for event in stored:
                if isinstance(event, SessionStarted | ProfileSwitched | SessionArchived):
                    _track_lifecycle(conn, event)
            self.db.after_commit(_emit(tuple(stored)))
        return stored

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
        sql = "SELECT data FROM events WHERE session_id = %s"
        params: list[Any] = [session_id]
        if first_seq is not None:
            sql += " AND seq >= %s"
            params.append(first_seq)
        if last_seq is not None:
            sql += " AND seq <= %s"
            params.append(last_seq)
        if types is not None:
            wanted = sorted({types} if isinstance(types, str) else set(types))
            if not wanted:
                return []
            sql += " AND type = ANY(%s)"
            params.append(wanted)
        rows = self.db.execute(sql + " ORDER BY seq", params)
        return [event_from_dict(r["data"]) for r in rows]

    def last_seq(self, session_id: str) -> int:
        """The highest seq stored for the session; 0 when it has no events."""
        rows = self.db.execute("SELECT last_seq FROM sessions WHERE session_id = %s", (session_id,))
        return int(rows[0]["last_seq"]) if rows else 0

    def compaction_events(self, session_id: str, after_seq: int = 0) -> list[Event]:
        """Compaction-state events of a session above ``after_seq``, in seq order."""
        rows = self.db.execute(
            "SELECT data FROM events WHERE session_id = %s AND type = ANY(%s) AND seq > %s "
            "ORDER BY seq",
            (session_id, list(COMPACTION_EVENT_TYPES), after_seq),
        )
        return [event_from_dict(r["data"]) for r in rows]

    def conversation_rows(
        self,
        session_id: str,
        skip: Sequence[tuple[int, int]] = (),
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
    ) -> list[Row]:
        """Conversation events outside ``skip`` (inclusive ranges), oldest first."""
        skip = sorted(skip)
        with self.db.connection() as conn:
            if skip and first_seq is None:
                first = conn.execute(
                    "SELECT min(seq) AS first FROM events WHERE session_id = %s AND type = ANY(%s)",
                    (session_id, list(CONVERSATION_TYPES)),
                ).fetchone()
                if first and first["first"] is not None and skip[0][0] <= first["first"]:
                    first_seq, skip = skip[0][1] + 1, skip[1:]
            sql = (
                f"SELECT seq, type, {_P} ->> 'turn_id' AS turn_id, {_P} ->> 'tokens' AS tokens "
                "FROM events WHERE session_id = %s AND type = ANY(%s)"
            )
            params: list[Any] = [session_id, list(CONVERSATION_TYPES)]
            if first_seq is not None:
                sql += " AND seq >= %s"
                params.append(first_seq)
            if last_seq is not None:
                sql += " AND seq <= %s"
                params.append(last_seq)
            for a, b in skip:
                sql += " AND NOT (seq BETWEEN %s AND %s)"
                params += [a, b]
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [
            Row(int(r["seq"]), str(r["type"]), str(r["turn_id"] or ""), int(r["tokens"] or 0))
            for r in rows
        ]

    def history_rows(
        self,
        session_id: str,
        *,
        below: int | None = None,
        above: int | None = None,
        limit: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """What history renders, as columns extracted from the JSON (see ``EventStore``)."""
        sql = f"SELECT {_HISTORY_COLUMNS} FROM events WHERE session_id = %s AND {_CONVERSATION}"
        params: list[Any] = [session_id, list(CONVERSATION_TYPES)]
        if above is not None:
            sql += " AND seq > %s ORDER BY seq"
            params.append(above)
        else:
            if below is not None:
                sql += " AND seq < %s"
                params.append(below)
            sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        return [tuple(r.values()) for r in self.db.execute(sql, params)]

    def conversation_seqs(self, session_id: str, below: int | None, limit: int) -> list[int]:
        """Seqs of conversation events below ``below`` (None: all), newest first."""
        sql = f"SELECT seq FROM events WHERE session_id = %s AND {_CONVERSATION}"
        params: list[Any] = [session_id, list(CONVERSATION_TYPES)]
        if below is not None:
            sql += " AND seq < %s"
            params.append(below)
        sql += " ORDER BY seq DESC LIMIT %s"
        params.append(limit)
        return [int(r["seq"]) for r in self.db.execute(sql, params)]

    def compaction_running(self, session_id: str) -> int | None:
        """The seq of the latest ``ContextCompactionStarted`` with no end recorded, else
        None; whether its process is alive is the compaction lease's to say."""
        rows = self.db.execute(
            "SELECT type, max(seq) AS seq, max(created_at) AS created_at FROM events "
            "WHERE session_id = %s AND type IN ('ContextCompactionStarted', "
            "'ContextCompactionCompleted', 'ContextCompactionFailed') GROUP BY type",
            (session_id,),
        )
        latest = {r["type"]: (int(r["seq"]), float(r["created_at"] or 0)) for r in rows}
        started = latest.get("ContextCompactionStarted")
        if started is None:
            return None
        ended = max((latest[t][0] for t in latest if t != "ContextCompactionStarted"), default=0)
        if ended > started[0]:
            return None
        return started[0]

    def indexed_stretch(self, session_id: str) -> tuple[int, int] | None:
        """The stretch of seqs recall has indexed, (low, last); None before the first."""
        rows = self.db.execute(
            "SELECT low_seq, last_seq FROM recall_progress WHERE session_id = %s", (session_id,)
        )
        if not rows:
            return None
        low = rows[0]["low_seq"]
        return (int(low) if low is not None else 0), int(rows[0]["last_seq"])

    def set_indexed_stretch(self, session_id: str, low: int, last: int) -> None:
        """Widen the recorded stretch, never narrow it (as the SQLite event store)."""
        self.db.execute(
            "INSERT INTO recall_progress(session_id, last_seq, low_seq) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET "
            "last_seq = GREATEST(recall_progress.last_seq, excluded.last_seq), "
            "low_seq = LEAST(COALESCE(recall_progress.low_seq, excluded.low_seq), "
            "excluded.low_seq)",
            (session_id, last, low),
        )

    def sessions(
        self, *, workspace_id: str | None = None, include_archived: bool = True
    ) -> list[SessionInfo]:
        """Every session (or one workspace's), oldest first."""
        sql = "SELECT * FROM sessions WHERE TRUE"
        params: list[Any] = []
        if workspace_id is not None:
            sql += " AND workspace_id = %s"
            params.append(workspace_id)
        if not include_archived:
            sql += " AND archived_at IS NULL"
        return [
            _session_info(r)
            for r in self.db.execute(sql + " ORDER BY created_at, session_id", params)
        ]

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self.db.execute("SELECT * FROM sessions WHERE session_id = %s", (session_id,))
        return _session_info(rows[0]) if rows else None

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""


def _track_lifecycle(conn: Any, event: Event) -> None:
    if isinstance(event, SessionStarted):
        conn.execute(
            "UPDATE sessions SET workspace_id = %s, profile = %s, created_at = %s "
            "WHERE session_id = %s",
            (event.workspace_id, event.profile, event.created_at, event.session_id),
        )
    elif isinstance(event, ProfileSwitched):
        conn.execute(
            "UPDATE sessions SET profile = %s WHERE session_id = %s",
            (event.to_profile, event.session_id),
        )
    elif isinstance(event, SessionArchived):
        conn.execute(
            "UPDATE sessions SET archived_at = %s WHERE session_id = %s",
            (event.created_at, event.session_id),
        )


def _session_info(row: dict[str, Any]) -> SessionInfo:
    return SessionInfo(
        session_id=row["session_id"],
        workspace_id=row["workspace_id"],
        profile=row["profile"],
        created_at=float(row["created_at"]),
        last_seq=int(row["last_seq"]),
        event_count=int(row["event_count"]),
        archived_at=row["archived_at"],
    )


__all__ = ["PgEventLog"]
