"""The append-only event log on PostgreSQL (the ``EventLog`` protocol).

A seq is assigned under the row lock of the session's ``sessions`` row, taken by an
``INSERT ... ON CONFLICT DO UPDATE`` of that counter row (which locks it like ``SELECT
... FOR UPDATE``) in the same statement that inserts the events: writers to one
session queue on that row (on any host), each reads the head its predecessor
committed, and a crash before ``COMMIT`` releases the lock with nothing written.
Writers to different sessions never wait for each other. Rows are ``(session_id,
seq)`` unique and triggers refuse UPDATE, DELETE and TRUNCATE: history is never
rewritten. The reads are the core's SQL event log (``kairox_core.store.sql``), shared
with SQLite; only the append and the history window are PostgreSQL's own SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg.types.json import Jsonb

from kairox_core.events import Event
from kairox_core.store.sql import (
    CONVERSATION_TYPES,
    SessionChanges,
    SqlEventLog,
    checked_batch,
    session_changes,
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


class PgEventLog(SqlEventLog[PgDatabase]):
    """The core's SQL event log (its reads) with PostgreSQL's own append and history
    window; every method is one short transaction or one query."""

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
        self.emit_after_commit(stored)
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


__all__ = ["PgEventLog"]
