"""The append-only event log on PostgreSQL (the ``EventLog`` protocol).

A seq is assigned under the row lock of the session's ``sessions`` row, taken by an
``INSERT ... ON CONFLICT DO UPDATE`` of that counter row (which locks it like ``SELECT
... FOR UPDATE``) in the same statement that inserts the events: writers to one
session queue on that row (on any host), each reads the head its predecessor
committed, and a crash before ``COMMIT`` releases the lock with nothing written.
Writers to different sessions never wait for each other. Rows are ``(session_id,
seq)`` unique and triggers refuse UPDATE, DELETE and TRUNCATE: history is never
rewritten. What is not SQL (validation, decoding rows, the lifecycle fold, the
compaction-run rule) is the core's, shared with SQLite: ``kairox_core.store.event_rows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from psycopg.types.json import Jsonb

from kairox_core.events import Event
from kairox_core.store.event_rows import (
    COMPACTION_EVENT_TYPES,
    COMPACTION_RUN_TYPES,
    CONVERSATION_TYPES,
    Row,
    SessionChanges,
    SessionInfo,
    checked_batch,
    compaction_running_seq,
    event_from_row,
    indexed_stretch,
    planning_row,
    session_changes,
    session_info,
    skip_leading,
    wanted_types,
)
from kairox_postgres.db import PgDatabase

_P = "data -> 'payload'"
# ``event_rows.HISTORY_COLUMNS``, extracted from the JSON; the first parameter is the
# counting scheme whose stored counts are wanted (others come back NULL: recounted).
_HISTORY_COLUMNS = (
    "seq, CASE type WHEN 'UserMessageAdded' THEN 0 WHEN 'AssistantMessageCompleted' THEN 1 "
    "ELSE 2 END AS kind, "
    f"{_P} ->> 'turn_id' AS turn_id, "
    f"CASE WHEN {_P} ->> 'token_counter' = %s THEN ({_P} ->> 'tokens')::bigint END AS tokens, "
    f"CASE type WHEN 'UserMessageAdded' THEN NULLIF(({_P} -> 'attachments')::text, '[]') "
    f"WHEN 'ToolInvocationCompleted' THEN jsonb_build_array({_P} ->> 'tool_call_id', "
    f"{_P} ->> 'tool_name', {_P} ->> 'arguments')::text END AS extra, "
    f"CASE type WHEN 'ToolInvocationCompleted' THEN {_P} ->> 'result' "
    f"WHEN 'AssistantMessageCompleted' THEN COALESCE({_P} ->> 'model_text', {_P} ->> 'text') "
    f"ELSE {_P} ->> 'text' END AS text"
)
_CONVERSATION = "type = ANY(%s)"
# A session's batch in one statement: the upsert creates or locks the session's row
# (writers to a session queue here, on any host), moves its counter past the batch and
# applies the batch's lifecycle changes; the insert numbers the events from the head
# it returned, writing each seq into the event's JSON too.
_APPEND_HEAD = """
WITH head AS (
    INSERT INTO sessions AS s
        (session_id, created_at, last_seq, event_count, workspace_id, profile, archived_at)
    VALUES (%(sid)s, %(at)s, %(n)s, %(n)s, %(ws)s, %(profile)s, %(archived)s)
    ON CONFLICT (session_id) DO UPDATE SET
        last_seq = s.last_seq + %(n)s,
        event_count = s.event_count + %(n)s,
        workspace_id = CASE WHEN %(set_ws)s THEN excluded.workspace_id ELSE s.workspace_id END,
        profile = CASE WHEN %(set_profile)s THEN excluded.profile ELSE s.profile END,
        created_at = CASE WHEN %(set_created)s THEN excluded.created_at ELSE s.created_at END,
        archived_at = CASE WHEN %(set_archived)s THEN excluded.archived_at
                      ELSE s.archived_at END
    RETURNING s.last_seq - %(n)s AS head
), stored AS (
    INSERT INTO events (session_id, seq, type, version, created_at, data)
"""
_APPEND_MANY = (
    _APPEND_HEAD
    + """    SELECT %(sid)s, head.head + b.i, b.type, b.version, b.at,
           jsonb_set(b.data, '{seq}', to_jsonb(head.head + b.i))
    FROM head, unnest(%(types)s::text[], %(versions)s::int[], %(ats)s::float8[],
                      %(datas)s::jsonb[]) WITH ORDINALITY AS b(type, version, at, data, i)
)
SELECT head FROM head
"""
)
# One event (a turn's user message, most appends): plain parameters, half the time of unnest.
_APPEND_ONE = (
    _APPEND_HEAD
    + """    SELECT %(sid)s, head.head + 1, %(type)s, %(version)s, %(event_at)s,
           jsonb_set(%(data)s::jsonb, '{seq}', to_jsonb(head.head + 1))
    FROM head
)
SELECT head FROM head
"""
)


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
        """Store events atomically (all or none), each with the next seq of its session.

        One statement per session (``_APPEND_ONE``, ``_APPEND_MANY``) locks its row,
        reserves the seqs and inserts the events; a batch for one session outside a
        transaction is therefore one round trip, with no BEGIN/COMMIT around it (a
        statement is atomic)."""
        batch = checked_batch(events)
        if not batch:
            return []
        per_session = session_changes(batch)
        if len(per_session) == 1:
            ((sid, changes),) = per_session.items()
            with self.db.connection() as conn:
                stored = self._append_session(conn, sid, changes)
        else:
            stored_by_sid: dict[str, list[Event]] = {}
            with self.db.atomic() as conn:
                for sid, changes in per_session.items():
                    stored_by_sid[sid] = self._append_session(conn, sid, changes)
            # back in batch order: the k-th event of a session is its k-th stored one
            taken = dict.fromkeys(stored_by_sid, 0)
            stored = []
            for event in batch:
                stored.append(stored_by_sid[event.session_id][taken[event.session_id]])
                taken[event.session_id] += 1
        self.db.after_commit(_emit(tuple(stored)))
        return stored

    def _append_session(self, conn: Any, sid: str, c: SessionChanges) -> list[Event]:
        datas = [e.to_dict() for e in c.events]
        params: dict[str, Any] = {
            "sid": sid,
            "n": c.count,
            "at": c.created_at if c.set_created else c.first_at,
            "set_ws": c.set_workspace,
            "ws": c.workspace_id,
            "set_profile": c.set_profile,
            "profile": c.profile,
            "set_created": c.set_created,
            "set_archived": c.set_archived,
            "archived": c.archived_at,
        }
        if c.count == 1:
            (event,) = c.events
            params.update(
                type=event.type,
                version=int(datas[0]["version"]),
                event_at=event.created_at,
                data=Jsonb(datas[0]),
            )
            row = conn.execute(_APPEND_ONE, params).fetchone()
        else:
            params.update(
                types=[e.type for e in c.events],
                versions=[int(d["version"]) for d in datas],
                ats=[e.created_at for e in c.events],
                datas=[Jsonb(d) for d in datas],
            )
            row = conn.execute(_APPEND_MANY, params).fetchone()
        head = int(row["head"])
        return [e.with_seq(head + i) for i, e in enumerate(c.events, 1)]

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
            wanted = wanted_types(types)
            if not wanted:
                return []
            sql += " AND type = ANY(%s)"
            params.append(wanted)
        rows = self.db.execute(sql + " ORDER BY seq", params)
        return [event_from_row(r["data"]) for r in rows]

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
        return [event_from_row(r["data"]) for r in rows]

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
                first_seq, skip = skip_leading(skip, first_seq, first and first["first"])
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
        return [planning_row(r["seq"], r["type"], r["turn_id"], r["tokens"]) for r in rows]

    def history_rows(
        self,
        session_id: str,
        *,
        below: int | None = None,
        above: int | None = None,
        limit: int | None = None,
        counter_key: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """What history renders (``event_rows.HISTORY_COLUMNS``; see ``EventStore``),
        extracted from the JSON."""
        sql = f"SELECT {_HISTORY_COLUMNS} FROM events WHERE session_id = %s AND {_CONVERSATION}"
        params: list[Any] = [counter_key, session_id, list(CONVERSATION_TYPES)]
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
            "SELECT type, max(seq) AS seq FROM events "
            "WHERE session_id = %s AND type = ANY(%s) GROUP BY type",
            (session_id, list(COMPACTION_RUN_TYPES)),
        )
        return compaction_running_seq({r["type"]: int(r["seq"]) for r in rows})

    def indexed_stretch(self, session_id: str) -> tuple[int, int] | None:
        """The stretch of seqs recall has indexed, (low, last); None before the first."""
        rows = self.db.execute(
            "SELECT low_seq, last_seq FROM recall_progress WHERE session_id = %s", (session_id,)
        )
        return indexed_stretch(rows[0]["low_seq"], rows[0]["last_seq"]) if rows else None

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
            session_info(r)
            for r in self.db.execute(sql + " ORDER BY created_at, session_id", params)
        ]

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self.db.execute("SELECT * FROM sessions WHERE session_id = %s", (session_id,))
        return session_info(rows[0]) if rows else None

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""


__all__ = ["PgEventLog"]
