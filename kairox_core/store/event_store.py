"""The append-only event store: every state change of every session, in order.

Each event is one row: ``(session_id, seq)`` unique, its type, its schema version and its
JSON. Sequence numbers are assigned inside ``BEGIN IMMEDIATE``, which holds SQLite's
write lock, so two processes appending to one session never duplicate or lose a seq; a
crash before ``COMMIT`` leaves nothing behind. Triggers refuse UPDATE and DELETE on the
events table: history is never rewritten (compaction adds summaries, it removes nothing).

A ``sessions`` table is kept alongside for listing: a row appears with a session's first
event; ``SessionStarted`` fills in its workspace and profile, ``ProfileSwitched`` and
``SessionArchived`` update it. Appending and the history projection are SQLite's own;
the reads are the shared SQL log's (store/sql/events.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kairox_core.events import (
    Event,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
)
from kairox_core.store.database import Database, DatabaseStore
from kairox_core.store.event_rows import (  # the first four re-exported, as before
    COMPACTION_EVENT_TYPES as COMPACTION_EVENT_TYPES,
)
from kairox_core.store.event_rows import (
    CONVERSATION_TYPES as CONVERSATION_TYPES,
)
from kairox_core.store.event_rows import (
    Row as Row,
)
from kairox_core.store.event_rows import (
    SessionInfo as SessionInfo,
)
from kairox_core.store.event_rows import checked_batch
from kairox_core.store.migrations import migrate
from kairox_core.store.sql.events import SqlEventLog

if TYPE_CHECKING:
    from kairox_core.store.base import HistoryRow

COMPONENT = "events"
# The conversation as plain columns, one row per conversation event, kept by a trigger
# in the statement that inserts the event (so in its transaction, whoever inserts: the
# store, ``kairox db copy``). A cold turn reads ~1,000 of them: no JSON is parsed at
# read time. The text comes last (a record is read up to its last column wanted) and
# the rows live in a rowid table (large rows fit its pages; a clustered WITHOUT ROWID
# table would spill most of them to overflow pages).
_KIND = (
    "CASE {r}.type WHEN 'UserMessageAdded' THEN 0 WHEN 'AssistantMessageCompleted' THEN 1 "
    "ELSE 2 END"
)
_PROJECTION = (
    "{r}.session_id, {r}.seq, " + _KIND + ", "
    "{r}.data ->> '$.payload.tokens', {r}.data ->> '$.payload.token_counter', "
    "{r}.data ->> '$.payload.turn_id', "
    "CASE {r}.type "
    "WHEN 'UserMessageAdded' THEN CASE WHEN json_array_length({r}.data, '$.payload.attachments')"
    " > 0 THEN {r}.data -> '$.payload.attachments' END "
    "WHEN 'ToolInvocationCompleted' THEN json_array({r}.data ->> '$.payload.tool_call_id', "
    "{r}.data ->> '$.payload.tool_name', {r}.data ->> '$.payload.arguments') END, "
    "CASE {r}.type WHEN 'ToolInvocationCompleted' THEN {r}.data ->> '$.payload.result' "
    "WHEN 'AssistantMessageCompleted' THEN coalesce({r}.data ->> '$.payload.model_text', "
    "{r}.data ->> '$.payload.text') "
    "ELSE {r}.data ->> '$.payload.text' END"
)
_IS_CONVERSATION = (
    "{r}.type IN ('AssistantMessageCompleted', 'ToolInvocationCompleted', 'UserMessageAdded')"
)
_HISTORY_TABLE = f"""
    CREATE TABLE history (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        tokens INTEGER,
        token_counter TEXT,
        turn_id TEXT,
        extra TEXT,
        text TEXT,
        UNIQUE (session_id, seq)
    );
    CREATE TRIGGER events_history AFTER INSERT ON events
    WHEN {_IS_CONVERSATION.format(r="NEW")}
    BEGIN INSERT INTO history SELECT {_PROJECTION.format(r="NEW")}; END;
    INSERT INTO history SELECT {_PROJECTION.format(r="events")} FROM events
    WHERE {_IS_CONVERSATION.format(r="events")} ORDER BY session_id, seq;
"""
# ``HISTORY_COLUMNS``; the stored count only when it was made under the scheme asked for
_HISTORY_SELECT = (
    "seq, kind, turn_id, CASE WHEN token_counter = ? THEN tokens END, extra, text FROM history"
)
# Recall's record of the stretch of each session's turns already indexed.
INDEXED_COMPONENT = "recall"
INDEXED_MIGRATIONS = (
    """
    CREATE TABLE recall_indexed (
        session_id TEXT NOT NULL,
        summary_seq INTEGER NOT NULL,
        documents INTEGER NOT NULL,
        PRIMARY KEY (session_id, summary_seq)
    );
    """,
    # 2: every turn is indexed, not only compacted ones: one watermark per session
    """
    DROP TABLE recall_indexed;
    CREATE TABLE recall_progress (
        session_id TEXT PRIMARY KEY,
        last_seq INTEGER NOT NULL
    );
    """,
    # 3: a session's backlog (turns from before recall) is indexed newest first, in steps
    "ALTER TABLE recall_progress ADD COLUMN low_seq INTEGER;",
)
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
    # 2: the conversation projection history reads (backfilled from the events)
    _HISTORY_TABLE,
    # 3: a reply's history text is what the model wrote, tags included (``model_text``)
    f"""
    DROP TRIGGER events_history;
    CREATE TRIGGER events_history AFTER INSERT ON events
    WHEN {_IS_CONVERSATION.format(r="NEW")}
    BEGIN INSERT INTO history SELECT {_PROJECTION.format(r="NEW")}; END;
    """,
)


class EventStore(DatabaseStore, SqlEventLog[Database]):
    """Append and read events. ``EventStore(path)`` opens the file; pass a ``Database``
    (or a connection from ``kairox_core.store.connect``) to share it with other stores."""

    def __init__(self, path_or_conn: str | os.PathLike[str] | Database | Any) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)
        with self.db.lock:
            migrate(self.db.conn, INDEXED_COMPONENT, INDEXED_MIGRATIONS)

    # --- writing -------------------------------------------------------------------

    def append_many(self, events: Iterable[Event]) -> list[Event]:
        """Store events atomically (all or none), each with the next seq of its session."""
        batch = checked_batch(events)
        stored: list[Event] = []
        if not batch:
            return stored
        with self.db.atomic() as conn:
            heads: dict[str, int] = {}
            counts: dict[str, int] = {}
            for event in batch:
                sid = event.session_id
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
            self.emit_after_commit(stored)
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

    # --- reading (the rest: SqlEventLog's) ----------------------------------------

    def history_rows(
        self,
        session_id: str,
        *,
        below: int | None = None,
        above: int | None = None,
        limit: int | None = None,
        counter_key: str | None = None,
    ) -> list[HistoryRow]:
        """What history renders (``event_rows.HISTORY_COLUMNS``: ``tokens`` is None
        unless counted under ``counter_key``), from the projection the trigger keeps.
        With ``above``: the rows above it, oldest first; otherwise newest first below
        ``below`` (None: from the newest), at most ``limit``."""
        sql = f"SELECT {_HISTORY_SELECT} WHERE session_id = ?"
        params: list[object] = [counter_key, session_id]
        if above is not None:
            sql += " AND seq > ? ORDER BY seq"
            params.append(above)
        else:
            if below is not None:
                sql += " AND seq < ?"
                params.append(below)
            sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self.db.lock:
            cursor = self.db.conn.cursor()
            cursor.row_factory = None  # plain tuples: no ``Row`` per row to convert back
            rows: list[HistoryRow] = cursor.execute(sql, params).fetchall()
            return rows
