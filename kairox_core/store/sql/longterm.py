"""Long-term chunks' rows and personal packs (``LongTermStore``), once for every SQL
backend.

What is the same everywhere lives here: the recorded vector space, reading chunks by id
and by filter, personal packs and their activations. Where a chunk's vector lives is
each backend's own (a sqlite-vec table beside the rows on SQLite, a pgvector column in
the row on PostgreSQL), so writing chunks, the k-NN, the export and the counts are the
subclass's.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from kairox_core.longterm.chunks import Chunk
from kairox_core.longterm.store import Activation, PackRow, chunk_filters
from kairox_core.store.sql.dialect import DB, SqlStore

CHUNK_COLUMNS = "id, scope, text, session_id, workspace_id, created_at, updated_at, source_seq"
_PACK_COLUMNS = "name, text, draft, created_at, updated_at"


def chunk_from_row(row: Any) -> Chunk:
    """A ``Chunk`` from a row with ``CHUNK_COLUMNS`` by name (any backend's)."""
    return Chunk(
        id=row["id"],
        scope=row["scope"],
        text=row["text"],
        session_id=row["session_id"],
        workspace_id=row["workspace_id"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        source_seq=row["source_seq"],
    )


def _pack(row: Any) -> PackRow:
    return PackRow(
        name=row["name"],
        text=row["text"],
        draft=bool(row["draft"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


class SqlLongTermStore(SqlStore[DB]):
    """The shared part of a ``LongTermStore`` over a ``SqlDatabase``."""

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    # --- the vector space and chunk rows ---------------------------------------------

    def vector_space(self) -> tuple[str, int] | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT backend, dimension FROM longterm_backend").fetchone()
        return (str(row["backend"]), int(row["dimension"])) if row is not None else None

    def get_chunk(self, chunk_id: str) -> Chunk | None:
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql(f"SELECT {CHUNK_COLUMNS} FROM longterm_chunks WHERE id = ?"), (chunk_id,)
            ).fetchone()
        return chunk_from_row(row) if row is not None else None

    def list_chunks(
        self,
        *,
        scope: str | None = None,
        owners: Sequence[str] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> list[Chunk]:
        where, args = chunk_filters(
            "?", scope=scope, session_id=session_id, workspace_id=workspace_id
        )
        if owners is not None:
            where.append(f"owner IN ({','.join('?' * len(owners))})" if owners else "1 = 0")
            args.extend(owners)
        sql = f"SELECT {CHUNK_COLUMNS} FROM longterm_chunks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql + " ORDER BY n"), args).fetchall()
        return [chunk_from_row(r) for r in rows]

    # --- personal packs and activations ----------------------------------------------

    def get_pack(self, name: str) -> PackRow | None:
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql(f"SELECT {_PACK_COLUMNS} FROM packs_personal WHERE name = ?"), (name,)
            ).fetchone()
        return _pack(row) if row is not None else None

    def list_packs(self) -> list[PackRow]:
        """Personal packs by name, in code-point order on every backend."""
        order = self.db.dialect.binary_collation
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT {_PACK_COLUMNS} FROM packs_personal ORDER BY name{order}"
            ).fetchall()
        return [_pack(r) for r in rows]

    def insert_pack(self, row: PackRow) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                self._sql(f"INSERT INTO packs_personal ({_PACK_COLUMNS}) VALUES (?, ?, ?, ?, ?)"),
                (row.name, row.text, bool(row.draft), row.created_at, row.updated_at),
            )

    def update_pack(self, name: str, text: str, draft: bool, updated_at: float) -> bool:
        with self.db.atomic() as conn:
            found = conn.execute(
                self._sql(
                    "UPDATE packs_personal SET text = ?, draft = ?, updated_at = ? "
                    "WHERE name = ? RETURNING name"
                ),
                (text, bool(draft), updated_at, name),
            ).fetchone()
        return found is not None

    def delete_pack(self, name: str) -> bool:
        with self.db.atomic() as conn:
            found = conn.execute(
                self._sql("DELETE FROM packs_personal WHERE name = ? RETURNING name"), (name,)
            ).fetchone()
        return found is not None

    def activate_pack(self, workspace_id: str, name: str, activated_at: float) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO pack_activations (workspace_id, name, activated_at) "
                    "VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                (workspace_id, name, activated_at),
            )

    def deactivate_pack(self, workspace_id: str, name: str) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                self._sql("DELETE FROM pack_activations WHERE workspace_id = ? AND name = ?"),
                (workspace_id, name),
            )

    def delete_activations(self, name: str) -> None:
        with self.db.atomic() as conn:
            conn.execute(self._sql("DELETE FROM pack_activations WHERE name = ?"), (name,))

    def activations(self, workspace_id: str | None = None) -> list[Activation]:
        """Activations (of ``workspace_id`` and of every workspace, or all), oldest first."""
        sql = "SELECT workspace_id, name, activated_at FROM pack_activations"
        args: tuple[str, ...] = ()
        if workspace_id is not None:
            sql += " WHERE workspace_id IN ('', ?)"
            args = (workspace_id,)
        sql += f" ORDER BY activated_at, name{self.db.dialect.binary_collation}"
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql), args).fetchall()
        return [
            Activation(str(r["workspace_id"]), str(r["name"]), float(r["activated_at"]))
            for r in rows
        ]


__all__ = ["CHUNK_COLUMNS", "SqlLongTermStore", "chunk_from_row"]
