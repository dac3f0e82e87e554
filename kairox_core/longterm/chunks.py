"""Long-term chunks in the Kairox database: rows plus a sqlite-vec index.

A chunk is text a person chose to keep. Its row lives in ``longterm_chunks``; its vector
in ``longterm_vec_<dim>`` (vec0, cosine), partitioned by *owner*: ``s:<session>`` for a
session chunk, ``w:<workspace>`` for a project chunk, ``g`` for a global one. A session
sees exactly three partitions (its own, its workspace's, global), so visibility is
decided by the KNN query itself: another session's or workspace's chunks are never
read, and each partition is searched with vec0's KNN (no exact scan, no post-filter).

The backend that embedded the vectors is recorded (``longterm_backend``); when the
configured one differs, every chunk is re-embedded (they are short, and our own).
"""

from __future__ import annotations

import builtins
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import EmbeddingBackend
from kairox_core.store.database import Database
from kairox_core.store.migrations import migrate

COMPONENT = "longterm"
SCOPES = ("session", "project", "global")
MIGRATIONS = [
    """
    CREATE TABLE longterm_chunks (
        n INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'project', 'global')),
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        session_id TEXT,
        workspace_id TEXT,
        source_seq INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX longterm_chunks_owner ON longterm_chunks(owner, n);
    CREATE TABLE longterm_backend (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        backend TEXT NOT NULL,
        dimension INTEGER NOT NULL
    );
    """,
]


class ChunkNotFoundError(KairoxUserError):
    """No long-term chunk with that id."""


@dataclass(frozen=True)
class Chunk:
    """A long-term chunk. ``session_id`` is the session that wrote it (always set for
    scope ``session``); ``workspace_id`` its workspace (always set for ``project``)."""

    id: str
    scope: str
    text: str
    session_id: str | None
    workspace_id: str | None
    created_at: float
    updated_at: float
    source_seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "text": self.text,
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "source_seq": self.source_seq,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class ChunkHit:
    """A chunk found for a query, with its cosine similarity (1 = same direction)."""

    chunk: Chunk
    similarity: float


def owner_of(scope: str, session_id: str | None, workspace_id: str | None) -> str:
    """The vec0 partition of a chunk; checks the ids its scope needs."""
    if scope not in SCOPES:
        raise KairoxUserError(f"scope must be one of {', '.join(SCOPES)}, not '{scope}'")
    if scope == "session":
        if not session_id:
            raise KairoxUserError("a session chunk needs session_id (the session it belongs to)")
        return f"s:{session_id}"
    if scope == "project":
        if not workspace_id:
            raise KairoxUserError("a project chunk needs workspace_id (its workspace)")
        return f"w:{workspace_id}"
    return "g"


def visible_owners(session_id: str | None, workspace_id: str | None) -> list[str]:
    """The partitions a session of ``workspace_id`` sees: its own, its workspace's, global."""
    owners = ["g"]
    if workspace_id:
        owners.insert(0, f"w:{workspace_id}")
    if session_id:
        owners.insert(0, f"s:{session_id}")
    return owners


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


_COLUMNS = "id, scope, text, session_id, workspace_id, created_at, updated_at, source_seq"


def _chunk(row: Any) -> Chunk:
    return Chunk(
        id=row[0],
        scope=row[1],
        text=row[2],
        session_id=row[3],
        workspace_id=row[4],
        created_at=float(row[5]),
        updated_at=float(row[6]),
        source_seq=row[7],
    )


def ensure_schema(db: Database) -> None:
    """Create or upgrade the tables (outside any transaction: migrations open their own)."""
    with db.lock:
        migrate(db.conn, COMPONENT, MIGRATIONS)


class ChunkStore:
    """Rows and vectors of long-term chunks on the shared ``Database`` (no events here:
    ``LongTerm`` writes them in the same transaction). Call ``ensure_schema`` first."""

    def __init__(self, db: Database, backend: EmbeddingBackend) -> None:
        self.db = db
        self.backend = backend

    @property
    def table(self) -> str:
        return f"longterm_vec_{int(self.backend.dimension)}"

    # --- vectors -----------------------------------------------------------------------

    def _ensure_index(self) -> None:
        """Inside the lock: the vec0 table exists and matches the configured backend."""
        conn = self.db.conn
        dim = int(self.backend.dimension)
        row = conn.execute("SELECT backend, dimension FROM longterm_backend").fetchone()
        current = (self.backend.name, dim)
        if row is not None and (row[0], int(row[1])) == current and self._has_table():
            return
        with self.db.atomic():
            if row is not None:
                old = f"longterm_vec_{int(row[1])}"
                conn.execute(f"DROP TABLE IF EXISTS {old}")
            conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            conn.execute(
                f"CREATE VIRTUAL TABLE {self.table} USING vec0("
                f" owner TEXT PARTITION KEY, embedding float[{dim}] distance_metric=cosine)"
            )
            conn.execute(
                "INSERT INTO longterm_backend(one, backend, dimension) VALUES (1, ?, ?) "
                "ON CONFLICT(one) DO UPDATE SET backend = excluded.backend, "
                "dimension = excluded.dimension",
                current,
            )
            rows = conn.execute("SELECT n, owner, text FROM longterm_chunks ORDER BY n").fetchall()
            for start in range(0, len(rows), 256):
                batch = rows[start : start + 256]
                vectors = self.backend.embed_documents([r[2] for r in batch])
                conn.executemany(
                    f"INSERT INTO {self.table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                    [(r[0], r[1], _pack(v)) for r, v in zip(batch, vectors, strict=True)],
                )

    def _has_table(self) -> bool:
        found = self.db.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)
        ).fetchone()
        return found is not None

    # --- rows --------------------------------------------------------------------------

    def insert(self, chunk: Chunk, owner: str) -> None:
        """Inside a transaction: the row and its vector."""
        vector = self.backend.embed_documents([chunk.text])[0]
        self.insert_many([(chunk, owner)], [vector])

    def insert_many(
        self, chunks: Sequence[tuple[Chunk, str]], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Inside a transaction: rows with vectors already computed (bulk loads)."""
        conn = self.db.conn
        with self.db.lock:
            self._ensure_index()
            for (chunk, owner), vector in zip(chunks, vectors, strict=True):
                cur = conn.execute(
                    "INSERT INTO longterm_chunks(id, scope, owner, text, session_id, "
                    "workspace_id, source_seq, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        chunk.id,
                        chunk.scope,
                        owner,
                        chunk.text,
                        chunk.session_id,
                        chunk.workspace_id,
                        chunk.source_seq,
                        chunk.created_at,
                        chunk.updated_at,
                    ),
                )
                conn.execute(
                    f"INSERT INTO {self.table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                    (cur.lastrowid, owner, _pack(vector)),
                )

    def get(self, chunk_id: str) -> Chunk:
        with self.db.lock:
            row = self.db.conn.execute(
                f"SELECT {_COLUMNS} FROM longterm_chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
        if row is None:
            raise ChunkNotFoundError(
                f"no long-term chunk '{chunk_id}' in {self.db.path or 'this database'}; "
                f"`kairox longterm list` shows the ids"
            )
        return _chunk(row)

    def update_text(self, chunk_id: str, text: str) -> Chunk:
        """Inside a transaction: new text, new vector."""
        conn = self.db.conn
        with self.db.lock:
            self._ensure_index()
            row = conn.execute(
                "SELECT n, owner FROM longterm_chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
            if row is None:
                raise ChunkNotFoundError(f"no long-term chunk '{chunk_id}'")
            conn.execute(
                "UPDATE longterm_chunks SET text = ?, updated_at = ? WHERE n = ?",
                (text, time.time(), row[0]),
            )
            vector = self.backend.embed_documents([text])[0]
            # vec0 rows are replaced, not updated (partition keys cannot change in place)
            conn.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (row[0],))
            conn.execute(
                f"INSERT INTO {self.table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                (row[0], row[1], _pack(vector)),
            )
        return self.get(chunk_id)

    def remove(self, chunk_id: str) -> None:
        """Inside a transaction: the row and its vector (the events keep the text)."""
        conn = self.db.conn
        with self.db.lock:
            row = conn.execute("SELECT n FROM longterm_chunks WHERE id = ?", (chunk_id,)).fetchone()
            if row is None:
                raise ChunkNotFoundError(f"no long-term chunk '{chunk_id}'")
            if self._has_table():
                conn.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (row[0],))
            conn.execute("DELETE FROM longterm_chunks WHERE n = ?", (row[0],))

    def list(
        self,
        scope: str | None = None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> builtins.list[Chunk]:
        """Chunks, oldest first. With ``session_id``/``workspace_id`` and no scope: the
        chunks such a session sees; with a scope: that scope's, narrowed by the ids."""
        sql = f"SELECT {_COLUMNS} FROM longterm_chunks"
        where: builtins.list[str] = []
        args: builtins.list[Any] = []
        if scope is not None:
            if scope not in SCOPES:
                raise KairoxUserError(f"scope must be one of {', '.join(SCOPES)}, not '{scope}'")
            where.append("scope = ?")
            args.append(scope)
            if session_id is not None:
                where.append("session_id = ?")
                args.append(session_id)
            if workspace_id is not None:
                where.append("workspace_id = ?")
                args.append(workspace_id)
        elif session_id is not None or workspace_id is not None:
            owners = visible_owners(session_id, workspace_id)
            where.append(f"owner IN ({','.join('?' * len(owners))})")
            args.extend(owners)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self.db.lock:
            rows = self.db.conn.execute(sql + " ORDER BY n", args).fetchall()
        return [_chunk(r) for r in rows]

    # --- search ------------------------------------------------------------------------

    def nearest(self, query: str, owners: Sequence[str], k: int) -> builtins.list[ChunkHit]:
        """The ``k`` chunks of ``owners`` most similar to ``query``, best first (every
        similarity, no threshold: the caller decides and explains)."""
        qvec = self.backend.embed_query(query)
        if not any(qvec):  # no feature at all: cosine is undefined
            return []
        return self.nearest_vector(qvec, owners, k)

    def nearest_vector(
        self, qvec: Sequence[float], owners: Sequence[str], k: int
    ) -> builtins.list[ChunkHit]:
        conn = self.db.conn
        blob = _pack(qvec)
        found: builtins.list[tuple[float, int]] = []
        with self.db.lock:
            self._ensure_index()
            for owner in owners:  # one vec0 KNN per visible partition
                rows = conn.execute(
                    f"SELECT rowid, distance FROM {self.table} "
                    f"WHERE embedding MATCH ? AND k = ? AND owner = ?",
                    (blob, k, owner),
                ).fetchall()
                found.extend((float(r[1]), int(r[0])) for r in rows if r[1] is not None)
            found.sort()
            best = found[:k]
            if not best:
                return []
            marks = ",".join("?" * len(best))
            rows = conn.execute(
                f"SELECT n, {_COLUMNS} FROM longterm_chunks WHERE n IN ({marks})",
                [n for _, n in best],
            ).fetchall()
        by_n = {int(r[0]): _chunk(tuple(r)[1:]) for r in rows}
        return [ChunkHit(by_n[n], 1.0 - dist) for dist, n in best if n in by_n]
