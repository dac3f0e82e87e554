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

_SCOPES = {s.value: s for s in MemoryScope}
_COLUMNS = (
    "id, scope, owner, key, body, workspace_id, session_id, created_at, updated_at, "
    "approved_at, prov_session_id, prov_turn_id, prov_raw"
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
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        if key is None and scope != "session":
            raise ValueError(f"a {scope.value} memory needs a key")
        if not isinstance(body, str) or not body.strip():
            raise ValueError("a memory body must be a non-empty string")
        prov = provenance or Provenance(session_id=session_id)
        if scope == "user":
            workspace_id = None
        if scope != "session":
            session_id = None
        with self.db.atomic() as conn:
            now = self.clock()
            approved_at = None if scope == "session" else now
            row = None
            if key is not None:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                    (scope.value, owner, key),
                ).fetchone()
            if row is not None:
                if row["body"] == body:
                    return record_from_row(row)
                self._archive_version(conn, row, now, "replaced")
                conn.execute(
                    "UPDATE memories SET body = ?, updated_at = ?, approved_at = ?, "
                    "prov_session_id = ?, prov_turn_id = ?, prov_raw = ? WHERE id = ?",
                    (body, now, approved_at, prov.session_id, prov.turn_id, prov.raw, row["id"]),
                )
                return MemoryRecord(
                    id=row["id"],
                    scope=scope,
                    key=key,
                    body=body,
                    workspace_id=row["workspace_id"],
                    session_id=row["session_id"],
                    created_at=row["created_at"],
                    updated_at=now,
                    approved_at=approved_at,
                    provenance=prov,
                )
            memory_id = new_id("m")
            conn.execute(
                f"INSERT INTO memories ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    memory_id,
                    scope.value,
                    owner,
                    key,
                    body,
                    workspace_id,
                    session_id,
                    now,
                    now,
                    approved_at,
                    prov.session_id,
                    prov.turn_id,
                    prov.raw,
                ),
            )
            return MemoryRecord(
                id=memory_id,
                scope=scope,
                key=key,
                body=body,
                workspace_id=workspace_id,
                session_id=session_id,
                created_at=now,
                updated_at=now,
                approved_at=approved_at,
                provenance=prov,
            )

    def update_body(self, memory_id: str, body: str) -> MemoryRecord:
        if not isinstance(body, str) or not body.strip():
            raise ValueError("a memory body must be a non-empty string")
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                raise MemoryNotFoundError(f"no memory with id '{memory_id}'")
            if row["body"] == body:
                return record_from_row(row)
            now = self.clock()
            self._archive_version(conn, row, now, "edited")
            approved_at = None if row["scope"] == "session" else now
            conn.execute(
                "UPDATE memories SET body = ?, updated_at = ?, approved_at = ? WHERE id = ?",
                (body, now, approved_at, memory_id),
            )
            return self._fetch(conn, memory_id)

    def delete(self, memory_id: str) -> bool:
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
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
            "INSERT INTO memory_history (memory_id, scope, owner, key, body, valid_from, "
            "replaced_at, ended, approved_at, prov_session_id, prov_turn_id, prov_raw) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["id"],
                row["scope"],
                row["owner"],
                row["key"],
                row["body"],
                row["updated_at"],
                now,
                ended,
                row["approved_at"],
                row["prov_session_id"],
                row["prov_turn_id"],
                row["prov_raw"],
            ),
        )

    def _fetch(self, conn: Any, memory_id: str) -> MemoryRecord:
        row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
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
                f"SELECT {_COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                (scope.value, owner, key),
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def get_by_id(self, memory_id: str) -> MemoryRecord | None:
        with self.db.lock:
            row = self.db.conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def list(
        self,
        scope: MemoryScope | str | None = None,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[MemoryRecord]:
        scopes = [parse_scope(scope)] if scope is not None else list(MemoryScope)
        clauses: list[str] = []
        params: list[Any] = []
        for s in scopes:
            if s == "user":
                clauses.append("scope = 'user'")
            elif s == "workspace":
                if workspace_id is None:
                    clauses.append("scope = 'workspace'")
                else:
                    clauses.append("(scope = 'workspace' AND owner = ?)")
                    params.append(workspace_id)
            elif session_id is not None:
                clauses.append("(scope = 'session' AND owner = ?)")
                params.append(session_id)
            elif workspace_id is not None:
                clauses.append("(scope = 'session' AND workspace_id = ?)")
                params.append(workspace_id)
            else:
                clauses.append("scope = 'session'")
        sql = (
            f"SELECT {_COLUMNS} FROM memories WHERE {' OR '.join(clauses)} "
            "ORDER BY updated_at DESC, rowid DESC"
        )
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
                f"SELECT {_COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?",
                (scope.value, owner, key),
            ).fetchone()
        versions = [
            MemoryVersion(
                memory_id=r["memory_id"],
                scope=scope,
                key=r["key"],
                body=r["body"],
                valid_from=r["valid_from"],
                replaced_at=r["replaced_at"],
                ended=r["ended"],
                approved_at=r["approved_at"],
                provenance=provenance_from_row(r),
            )
            for r in rows
        ]
        if current is not None:
            versions.append(
                MemoryVersion(
                    memory_id=current["id"],
                    scope=scope,
                    key=current["key"],
                    body=current["body"],
                    valid_from=current["updated_at"],
                    replaced_at=None,
                    ended=None,
                    approved_at=current["approved_at"],
                    provenance=provenance_from_row(current),
                )
            )
        return versions


def provenance_from_row(row: Any) -> Provenance:
    """A memory row's ``Provenance`` (its ``prov_*`` columns, by name: any backend's)."""
    return Provenance(
        session_id=row["prov_session_id"], turn_id=row["prov_turn_id"], raw=row["prov_raw"] or ""
    )


def record_from_row(row: Any) -> MemoryRecord:
    """A ``MemoryRecord`` from a ``memories`` row with its columns by name (any backend's)."""
    return MemoryRecord(
        id=row["id"],
        scope=_SCOPES[row["scope"]],
        key=row["key"],
        body=row["body"],
        workspace_id=row["workspace_id"],
        session_id=row["session_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        approved_at=row["approved_at"],
        provenance=provenance_from_row(row),
    )
