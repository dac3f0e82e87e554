"""``SqliteMemoryStore``: accepted memories and their history, in the Kairox database.

Tables ``memories`` (the current body per (scope, owner, key)) and ``memory_history``
(every body a key had before), next to the event store's tables in the same file.
Writes run in ``BEGIN IMMEDIATE`` transactions, so two processes writing the same key
serialise, and each lookup reads the file afresh (no cache): a change made by the CLI
is visible to a running session at its next turn.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable
from typing import Any

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import (
    MemoryNotFoundError,
    MemoryRecord,
    MemoryVersion,
    Provenance,
    new_id,
    owner_of,
    parse_scope,
)
from kairox_core.store.database import Database, DatabaseStore
from kairox_core.store.memory_rows import (
    COLUMNS,
    HISTORY_COLUMNS,
    PutRequest,
    approved_at,
    archived_values,
    check_body,
    list_filter,
    versions,
)
from kairox_core.store.memory_rows import (  # re-exported: backends imported them from here
    provenance_from_row as provenance_from_row,
)
from kairox_core.store.memory_rows import (
    record_from_row as record_from_row,
)

COMPONENT = "memory"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE memories (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        owner TEXT NOT NULL,
        key TEXT CHECK (key IS NOT NULL OR scope = 'session'),
        body TEXT NOT NULL,
        workspace_id TEXT,
        session_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        approved_at REAL,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX memories_by_key ON memories (scope, owner, key) WHERE key IS NOT NULL;
    CREATE INDEX memories_by_workspace ON memories (workspace_id, scope);
    CREATE INDEX memories_by_session ON memories (session_id, scope);
    CREATE TABLE memory_history (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT,
        body TEXT NOT NULL,
        valid_from REAL NOT NULL,
        replaced_at REAL NOT NULL,
        ended TEXT NOT NULL CHECK (ended IN ('replaced', 'edited', 'deleted')),
        approved_at REAL,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX memory_history_by_key ON memory_history (scope, owner, key, id);
    CREATE INDEX memory_history_by_memory ON memory_history (memory_id, id);
    """,
)


class SqliteMemoryStore(DatabaseStore):
    """The built-in ``MemoryStore``. ``SqliteMemoryStore(path)`` opens (and migrates) the
    database; pass the ``Database`` of an ``EventStore`` to share its connection, so an
    approval's memory write and its events commit together."""

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | Database | Any,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)
        self.clock = clock

    # --- writes ----------------------------------------------------------------------

    def put(
        self,
        scope: MemoryScope | str,
        key: str | None,
        body: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: Provenance | None = None,
    ) -> MemoryRecord:
        req = PutRequest.of(
            scope,
            key,
            body,
            workspace_id=workspace_id,
            session_id=session_id,
            provenance=provenance,
        )
        with self.db.atomic() as conn:  # BEGIN IMMEDIATE: one writer to the file at a time
            now = self.clock()
            row = None
            if req.key is not None:
                row = conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                    (req.scope.value, req.owner, req.key),
                ).fetchone()
            if row is None:
                memory_id = new_id("m")
                conn.execute(
                    f"INSERT INTO memories ({COLUMNS}) VALUES ({', '.join('?' * 13)})",
                    req.insert_values(memory_id, now),
                )
                return req.inserted(memory_id, now)
            if row["body"] == req.body:
                return record_from_row(row)
            self._archive_version(conn, row, now, "replaced")
            prov = req.provenance
            conn.execute(
                "UPDATE memories SET body = ?, updated_at = ?, approved_at = ?, "
                "prov_session_id = ?, prov_turn_id = ?, prov_raw = ? WHERE id = ?",
                (
                    req.body,
                    now,
                    approved_at(req.scope, now),
                    prov.session_id,
                    prov.turn_id,
                    prov.raw,
                    row["id"],
                ),
            )
            return req.replaced(row, now)

    def update_body(self, memory_id: str, body: str) -> MemoryRecord:
        check_body(body)
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                raise MemoryNotFoundError(f"no memory with id '{memory_id}'")
            if row["body"] == body:
                return record_from_row(row)
            now = self.clock()
            self._archive_version(conn, row, now, "edited")
            conn.execute(
                "UPDATE memories SET body = ?, updated_at = ?, approved_at = ? WHERE id = ?",
                (body, now, approved_at(row["scope"], now), memory_id),
            )
            return self._fetch(conn, memory_id)

    def delete(self, memory_id: str) -> bool:
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._archive_version(conn, row, self.clock(), "deleted")
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
            return True

    def archive_session(self, session_id: str) -> int:
        with self.db.atomic() as conn:
            cur = conn.execute(
                "DELETE FROM memories WHERE scope = 'session' AND owner = ?", (session_id,)
            )
            conn.execute(
                "DELETE FROM memory_history WHERE scope = 'session' AND owner = ?", (session_id,)
            )
            return int(cur.rowcount)

    def _archive_version(self, conn: Any, row: Any, now: float, ended: str) -> None:
        conn.execute(
            f"INSERT INTO memory_history ({HISTORY_COLUMNS}) VALUES ({', '.join('?' * 12)})",
            archived_values(row, now, ended),
        )

    def _fetch(self, conn: Any, memory_id: str) -> MemoryRecord:
        row = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return record_from_row(row)

    # --- reads -----------------------------------------------------------------------

    def get(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> MemoryRecord | None:
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        with self.db.lock:
            row = self.db.conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                (scope.value, owner, key),
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def get_by_id(self, memory_id: str) -> MemoryRecord | None:
        with self.db.lock:
            row = self.db.conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def list(
        self,
        scope: MemoryScope | str | None = None,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[MemoryRecord]:
        where, params = list_filter(
            scope, workspace_id=workspace_id, session_id=session_id, mark="?"
        )
        sql = f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY updated_at DESC, rowid DESC"
        with self.db.lock:
            rows = self.db.conn.execute(sql, params).fetchall()
        return [record_from_row(row) for row in rows]

    def history(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> builtins.list[MemoryVersion]:
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        with self.db.lock:
            rows = self.db.conn.execute(
                "SELECT * FROM memory_history WHERE scope = ? AND owner = ? AND key = ? "
                "ORDER BY id",
                (scope.value, owner, key),
            ).fetchall()
            current = self.db.conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                (scope.value, owner, key),
            ).fetchone()
        return versions(scope, rows, current)
