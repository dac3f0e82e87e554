"""``LongTermStore`` on PostgreSQL: long-term chunks with pgvector vectors, personal packs.

A chunk's vector sits in its row (``longterm_chunks.embedding``, an untyped ``vector``
column: the space's dimension is its backend's, recorded in ``longterm_backend``).
k-NN is exact: ``embedding <=> q`` (pgvector's cosine distance, 1 - cosine, the metric
of the SQLite vec0 table) over the rows of the partitions asked for, which the
``(owner, n)`` index narrows to, ties oldest first. So a similarity, and a ``[longterm]
threshold``, mean the same as on SQLite. Writes join ``PgDatabase.atomic()``, so a row
and its event commit together; a backend change re-embeds every chunk in one
transaction under an advisory lock, so two processes never both do it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from kairox_core.errors import KairoxUserError
from kairox_core.longterm.chunks import Chunk
from kairox_core.longterm.store import Activation, Embed, PackRow, StoredChunk, chunk_filters
from kairox_postgres.db import PgDatabase

_SPACE_LOCK = 0x6B78_4C74  # "kxLt": the advisory lock key for a change of vector space
_COLUMNS = "id, scope, text, session_id, workspace_id, created_at, updated_at, source_seq"
_BATCH = 256
# rank (n, distance) only, then read the k winners' rows: the sort carries no text. NaN
# (a zero vector) sorts after every number, so dropping it after the LIMIT keeps the
# same non-NaN rows as dropping it before.
_NEAREST = (
    "WITH near AS ("
    " SELECT n, embedding <=> %s::vector AS distance FROM longterm_chunks"
    " WHERE owner = ANY(%s) AND embedding IS NOT NULL ORDER BY distance, n LIMIT %s) "
    f"SELECT {', '.join('c.' + c for c in _COLUMNS.split(', '))}, near.distance "
    "FROM near JOIN longterm_chunks c ON c.n = near.n "
    "WHERE near.distance <> 'NaN'::float8 ORDER BY near.distance, near.n"
)


def vector_text(vector: Sequence[float]) -> str:
    """pgvector's text form of ``vector``."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def parse_vector(text: str) -> tuple[float, ...]:
    """pgvector's text form back to float32 values (what SQLite's vec0 stores too)."""
    inner = text.strip()[1:-1]
    values = [float(x) for x in inner.split(",")] if inner else []
    return struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values))


def _chunk(row: dict[str, Any]) -> Chunk:
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


def _pack(row: dict[str, Any]) -> PackRow:
    return PackRow(
        name=row["name"],
        text=row["text"],
        draft=bool(row["draft"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


class PgLongTermStore:
    """Long-term chunks and personal packs on a ``PgDatabase`` (schema: the
    ``longterm`` and ``packs`` components of schema.py)."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    # --- the vector space ------------------------------------------------------------

    def vector_space(self) -> tuple[str, int] | None:
        rows = self.db.execute("SELECT backend, dimension FROM longterm_backend")
        return (str(rows[0]["backend"]), int(rows[0]["dimension"])) if rows else None

    def use_space(self, backend: str, dimension: int, embed: Embed) -> int:
        wanted = (backend, int(dimension))
        if self.vector_space() == wanted:
            return 0
        with self.db.atomic() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SPACE_LOCK,))
            row = conn.execute("SELECT backend, dimension FROM longterm_backend").fetchone()
            if row is not None and (row["backend"], int(row["dimension"])) == wanted:
                return 0  # another process switched meanwhile
            conn.execute(
                "INSERT INTO longterm_backend(one, backend, dimension) VALUES (1, %s, %s) "
                "ON CONFLICT (one) DO UPDATE SET backend = excluded.backend, "
                "dimension = excluded.dimension",
                wanted,
            )
            rows = conn.execute("SELECT n, text FROM longterm_chunks ORDER BY n").fetchall()
            for start in range(0, len(rows), _BATCH):
                batch = rows[start : start + _BATCH]
                vectors = embed([r["text"] for r in batch])
                with conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE longterm_chunks SET embedding = %s::vector WHERE n = %s",
                        [(vector_text(v), r["n"]) for r, v in zip(batch, vectors, strict=True)],
                    )
        return len(rows)

    def _dimension(self, conn: Any) -> int:
        row = conn.execute("SELECT dimension FROM longterm_backend").fetchone()
        if row is None:
            raise KairoxUserError("no vector space for long-term chunks yet: use_space first")
        return int(row["dimension"])

    @staticmethod
    def _checked(vector: Sequence[float], dimension: int) -> str:
        if len(vector) != dimension:
            raise KairoxUserError(
                f"a long-term vector has {len(vector)} dimensions; the space in use has {dimension}"
            )
        return vector_text(vector)

    # --- chunks ----------------------------------------------------------------------

    def insert_chunks(self, rows: Sequence[tuple[Chunk, str, Sequence[float]]]) -> None:
        if not rows:
            return
        with self.db.atomic() as conn:
            dim = self._dimension(conn)
            params = [
                (
                    c.id,
                    c.scope,
                    owner,
                    c.text,
                    c.session_id,
                    c.workspace_id,
                    c.source_seq,
                    c.created_at,
                    c.updated_at,
                    self._checked(v, dim),
                )
                for c, owner, v in rows
            ]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO longterm_chunks(id, scope, owner, text, session_id, "
                    "workspace_id, source_seq, created_at, updated_at, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector)",
                    params,
                )

    def get_chunk(self, chunk_id: str) -> Chunk | None:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM longterm_chunks WHERE id = %s", (chunk_id,))
        return _chunk(rows[0]) if rows else None

    def update_chunk(
        self, chunk_id: str, text: str, updated_at: float, vector: Sequence[float]
    ) -> bool:
        with self.db.atomic() as conn:
            found = conn.execute(
                "UPDATE longterm_chunks SET text = %s, updated_at = %s, embedding = %s::vector "
                "WHERE id = %s RETURNING n",
                (text, updated_at, self._checked(vector, self._dimension(conn)), chunk_id),
            ).fetchone()
        return found is not None

    def delete_chunk(self, chunk_id: str) -> bool:
        rows = self.db.execute("DELETE FROM longterm_chunks WHERE id = %s RETURNING n", (chunk_id,))
        return bool(rows)

    def list_chunks(
        self,
        *,
        scope: str | None = None,
        owners: Sequence[str] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> list[Chunk]:
        where, args = chunk_filters(
            "%s", scope=scope, session_id=session_id, workspace_id=workspace_id
        )
        if owners is not None:
            where.append("owner = ANY(%s)")
            args.append(list(owners))
        sql = f"SELECT {_COLUMNS} FROM longterm_chunks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [_chunk(r) for r in self.db.execute(sql + " ORDER BY n", args)]

    def nearest_chunks(
        self, vector: Sequence[float], owners: Sequence[str], k: int
    ) -> list[tuple[Chunk, float]]:
        if k <= 0 or not owners:
            return []
        try:  # one round trip: pgvector itself refuses a query of another dimension
            rows = self.db.execute(_NEAREST, (vector_text(vector), list(owners), k))
        except psycopg.errors.DataException as exc:
            raise KairoxUserError(
                f"a long-term query vector does not fit the space: {exc}"
            ) from exc
        return [(_chunk(r), 1.0 - float(r["distance"])) for r in rows]

    def export_chunks(self) -> Iterator[StoredChunk]:
        rows = self.db.execute(
            f"SELECT owner, {_COLUMNS}, embedding::text AS vector FROM longterm_chunks ORDER BY n"
        )
        for r in rows:
            vector = parse_vector(r["vector"]) if r["vector"] is not None else ()
            yield StoredChunk(_chunk(r), str(r["owner"]), vector)

    def chunk_counts(self) -> tuple[int, int]:
        row = self.db.execute(
            "SELECT count(*) AS rows, count(embedding) AS vectors FROM longterm_chunks"
        )[0]
        return int(row["rows"]), int(row["vectors"])

    # --- personal packs and activations ----------------------------------------------

    def get_pack(self, name: str) -> PackRow | None:
        rows = self.db.execute(
            "SELECT name, text, draft, created_at, updated_at FROM packs_personal WHERE name = %s",
            (name,),
        )
        return _pack(rows[0]) if rows else None

    def list_packs(self) -> list[PackRow]:
        rows = self.db.execute(
            "SELECT name, text, draft, created_at, updated_at FROM packs_personal "
            'ORDER BY name COLLATE "C"'
        )
        return [_pack(r) for r in rows]

    def insert_pack(self, row: PackRow) -> None:
        self.db.execute(
            "INSERT INTO packs_personal(name, text, draft, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (row.name, row.text, row.draft, row.created_at, row.updated_at),
        )

    def update_pack(self, name: str, text: str, draft: bool, updated_at: float) -> bool:
        rows = self.db.execute(
            "UPDATE packs_personal SET text = %s, draft = %s, updated_at = %s "
            "WHERE name = %s RETURNING name",
            (text, draft, updated_at, name),
        )
        return bool(rows)

    def delete_pack(self, name: str) -> bool:
        rows = self.db.execute("DELETE FROM packs_personal WHERE name = %s RETURNING name", (name,))
        return bool(rows)

    def activate_pack(self, workspace_id: str, name: str, activated_at: float) -> None:
        self.db.execute(
            "INSERT INTO pack_activations(workspace_id, name, activated_at) "
            "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (workspace_id, name, activated_at),
        )

    def deactivate_pack(self, workspace_id: str, name: str) -> None:
        self.db.execute(
            "DELETE FROM pack_activations WHERE workspace_id = %s AND name = %s",
            (workspace_id, name),
        )

    def delete_activations(self, name: str) -> None:
        self.db.execute("DELETE FROM pack_activations WHERE name = %s", (name,))

    def activations(self, workspace_id: str | None = None) -> list[Activation]:
        sql = "SELECT workspace_id, name, activated_at FROM pack_activations"
        args: tuple[str, ...] = ()
        if workspace_id is not None:
            sql += " WHERE workspace_id IN ('', %s)"
            args = (workspace_id,)
        rows = self.db.execute(sql + ' ORDER BY activated_at, name COLLATE "C"', args)
        return [
            Activation(str(r["workspace_id"]), str(r["name"]), float(r["activated_at"]))
            for r in rows
        ]


__all__ = ["PgLongTermStore", "parse_vector", "vector_text"]
