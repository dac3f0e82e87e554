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
from typing import Any

import psycopg

from kairox_core.errors import KairoxUserError
from kairox_core.store.protocol import Embed, LongTermCapabilities, StoredChunk
from kairox_core.store.protocol import LongTermChunk as Chunk
from kairox_core.store.sql import CHUNK_COLUMNS, SqlLongTermStore, chunk_from_row
from kairox_postgres.db import PgDatabase

_SPACE_LOCK = 0x6B78_4C74  # "kxLt": the advisory lock key for a change of vector space
_BATCH = 256
# rank (n, distance) only, then read the k winners' rows: the sort carries no text. NaN
# (a zero vector) sorts after every number, so dropping it after the LIMIT keeps the
# same non-NaN rows as dropping it before.
_NEAREST = (
    "WITH near AS ("
    " SELECT n, embedding <=> %s::vector AS distance FROM longterm_chunks"
    " WHERE owner = ANY(%s) AND embedding IS NOT NULL ORDER BY distance, n LIMIT %s) "
    f"SELECT {', '.join('c.' + c for c in CHUNK_COLUMNS.split(', '))}, near.distance "
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


class PgLongTermStore(SqlLongTermStore[PgDatabase]):
    """Long-term chunks and personal packs on a ``PgDatabase`` (schema: the
    ``longterm`` and ``packs`` components of schema.py)."""

    # --- the vector space ------------------------------------------------------------

    capabilities = LongTermCapabilities()

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
        return [(chunk_from_row(r), 1.0 - float(r["distance"])) for r in rows]

    def export_chunks(self) -> Iterator[StoredChunk]:
        rows = self.db.execute(
            f"SELECT owner, {CHUNK_COLUMNS}, embedding::text AS vector "
            "FROM longterm_chunks ORDER BY n"
        )
        for r in rows:
            vector = parse_vector(r["vector"]) if r["vector"] is not None else ()
            yield StoredChunk(chunk_from_row(r), str(r["owner"]), vector)

    def chunk_counts(self) -> tuple[int, int]:
        row = self.db.execute(
            "SELECT count(*) AS rows, count(embedding) AS vectors FROM longterm_chunks"
        )[0]
        return int(row["rows"]), int(row["vectors"])


__all__ = ["PgLongTermStore", "parse_vector", "vector_text"]
