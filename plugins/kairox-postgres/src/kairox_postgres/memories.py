"""``PgMemoryStore``: accepted memories and their history, on PostgreSQL.

The same tables and semantics as ``SqliteMemoryStore`` (kairox_core/store/memory_store.py);
what SQLite gets from ``BEGIN IMMEDIATE`` (one writer at a time) comes here from a
transaction-level advisory lock on the (scope, owner, key) being written, so two hosts
writing one key serialise and neither fails on the unique index.
"""

from __future__ import annotations

import builtins
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
from kairox_core.store.memory_store import provenance_from_row, record_from_row
from kairox_postgres.db import PgDatabase

_COLUMNS = (
    "id, scope, owner, key, body, workspace_id, session_id, created_at, updated_at, "
    "approved_at, prov_session_id, prov_turn_id, prov_raw"
)


class PgMemoryStore:
    """The ``MemoryStore`` of the ``postgresql`` storage (shares its transactions)."""

    def __init__(self, db: PgDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""

    def __enter__(self) -> PgMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"memory\x1f{scope.value}\x1f{owner}\x1f{key}",),
                )
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
                    (scope.value, owner, key),
                ).fetchone()
            if row is not None:
                if row["body"] == body:
                    return record_from_row(row)
                self._archive_version(conn, row, now, "replaced")
                conn.execute(
                    "UPDATE memories SET body = %s, updated_at = %s, approved_at = %s, "
                    "prov_session_id = %s, prov_turn_id = %s, prov_raw = %s WHERE id = %s",
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
                f"INSERT INTO memories ({_COLUMNS}) VALUES ({', '.join(['%s'] * 13)})",
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
                f"SELECT {_COLUMNS} FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
            ).fetchone()
            if row is None:
                raise MemoryNotFoundError(f"no memory with id '{memory_id}'")
            if row["body"] == body:
                return record_from_row(row)
            now = self.clock()
            self._archive_version(conn, row, now, "edited")
            approved_at = None if row["scope"] == "session" else now
            conn.execute(
                "UPDATE memories SET body = %s, updated_at = %s, approved_at = %s WHERE id = %s",
                (body, now, approved_at, memory_id),
            )
            return self._fetch(conn, memory_id)

    def delete(self, memory_id: str) -> bool:
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._archive_version(conn, row, self.clock(), "deleted")
            conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
            return True

    def archive_session(self, session_id: str) -> int:
        with self.db.atomic() as conn:
            cur = conn.execute(
                "DELETE FROM memories WHERE scope = 'session' AND owner = %s", (session_id,)
            )
            conn.execute(
                "DELETE FROM memory_history WHERE scope = 'session' AND owner = %s", (session_id,)
            )
            return int(cur.rowcount)

    def _archive_version(self, conn: Any, row: Any, now: float, ended: str) -> None:
        conn.execute(
            "INSERT INTO memory_history (memory_id, scope, owner, key, body, valid_from, "
            "replaced_at, ended, approved_at, prov_session_id, prov_turn_id, prov_raw) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
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
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
                (scope.value, owner, key),
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def get_by_id(self, memory_id: str) -> MemoryRecord | None:
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = %s", (memory_id,)
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
                    clauses.append("(scope = 'workspace' AND owner = %s)")
                    params.append(workspace_id)
            elif session_id is not None:
                clauses.append("(scope = 'session' AND owner = %s)")
                params.append(session_id)
            elif workspace_id is not None:
                clauses.append("(scope = 'session' AND workspace_id = %s)")
                params.append(workspace_id)
            else:
                clauses.append("scope = 'session'")
        sql = (
            f"SELECT {_COLUMNS} FROM memories WHERE {' OR '.join(clauses)} "
            "ORDER BY updated_at DESC, n DESC"
        )
        with self.db.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
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
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM memory_history WHERE scope = %s AND owner = %s AND key = %s "
                "ORDER BY id",
                (scope.value, owner, key),
            ).fetchall()
            current = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
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


__all__ = ["PgMemoryStore"]
