"""``LongTermStore`` on SQLite: chunk rows plus a sqlite-vec index, and personal packs.

A chunk's row lives in ``longterm_chunks``; its vector in ``longterm_vec_<dim>`` (vec0,
cosine) under the row's ``n`` as rowid, partitioned by owner (``s:<session>``,
``w:<workspace>``, ``g``), so a k-NN reads only the partitions asked for: one vec0 KNN
per partition, no exact scan, no post-filter. ``longterm_backend`` records the space.
Every method takes the ``Database`` lock, and writes join its ``atomic()`` block. The
rows' reads and the packs are the shared SQL store's (kairox_core/store/sql/longterm.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Sequence

from kairox_core.capabilities import LongTermCapabilities
from kairox_core.errors import KairoxUserError
from kairox_core.longterm.chunks import Chunk
from kairox_core.longterm.store import Embed, StoredChunk
from kairox_core.store.database import Database
from kairox_core.store.migrations import migrate
from kairox_core.store.sql.longterm import CHUNK_COLUMNS, SqlLongTermStore, chunk_from_row

CHUNKS_COMPONENT = "longterm"
CHUNKS_MIGRATIONS = [
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
PACKS_COMPONENT = "packs"
PACKS_MIGRATIONS = [
    """
    CREATE TABLE packs_personal (
        name TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        draft INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE pack_activations (
        workspace_id TEXT NOT NULL,  -- '' = every workspace
        name TEXT NOT NULL,
        activated_at REAL NOT NULL,
        PRIMARY KEY (workspace_id, name)
    );
    """,
]
_BATCH = 256


def vec_table(dimension: int) -> str:
    """The vec0 table of a space of ``dimension``."""
    return f"longterm_vec_{int(dimension)}"


def _blob(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


class SqliteLongTermStore(SqlLongTermStore[Database]):
    """Long-term chunks and personal packs in the shared ``Database`` (tables created
    on construction: call it outside any transaction)."""

    capabilities = LongTermCapabilities(when_free=True)

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        with db.lock:
            migrate(db.conn, CHUNKS_COMPONENT, CHUNKS_MIGRATIONS)
            migrate(db.conn, PACKS_COMPONENT, PACKS_MIGRATIONS)

    def when_free(self, probe: Callable[[], bool]) -> bool | None:
        """``probe()`` if the database's lock is free at once, else None (no wait)."""
        from kairox_core.retrieval.threads import if_free

        return if_free(self.db.lock, probe)

    # --- the vector space ------------------------------------------------------------

    @property
    def table(self) -> str | None:
        """The vec0 table of the space in use (None before the first use)."""
        space = self.vector_space()
        return vec_table(space[1]) if space is not None else None

    def use_space(self, backend: str, dimension: int, embed: Embed) -> int:
        conn = self.db.conn
        dimension = int(dimension)
        with self.db.lock:
            current = self.vector_space()
            if current == (backend, dimension) and self._has_table(vec_table(dimension)):
                return 0
            with self.db.atomic():
                if current is not None:
                    conn.execute(f"DROP TABLE IF EXISTS {vec_table(current[1])}")
                table = vec_table(dimension)
                conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute(
                    f"CREATE VIRTUAL TABLE {table} USING vec0("
                    f" owner TEXT PARTITION KEY, embedding float[{dimension}] "
                    f"distance_metric=cosine)"
                )
                conn.execute(
                    "INSERT INTO longterm_backend(one, backend, dimension) VALUES (1, ?, ?) "
                    "ON CONFLICT(one) DO UPDATE SET backend = excluded.backend, "
                    "dimension = excluded.dimension",
                    (backend, dimension),
                )
                rows = conn.execute(
                    "SELECT n, owner, text FROM longterm_chunks ORDER BY n"
                ).fetchall()
                for start in range(0, len(rows), _BATCH):
                    batch = rows[start : start + _BATCH]
                    vectors = embed([r[2] for r in batch])
                    conn.executemany(
                        f"INSERT INTO {table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                        [(r[0], r[1], _blob(v)) for r, v in zip(batch, vectors, strict=True)],
                    )
            return len(rows)

    def _has_table(self, table: str) -> bool:
        found = self.db.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        return found is not None

    def _table_in_use(self) -> str:
        table = self.table
        if table is None or not self._has_table(table):
            raise KairoxUserError("no vector space for long-term chunks yet: use_space first")
        return table

    # --- chunks ----------------------------------------------------------------------

    def insert_chunks(self, rows: Sequence[tuple[Chunk, str, Sequence[float]]]) -> None:
        conn = self.db.conn
        with self.db.lock, self.db.atomic():
            table = self._table_in_use()
            for chunk, owner, vector in rows:
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
                    f"INSERT INTO {table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                    (cur.lastrowid, owner, _blob(vector)),
                )

    def update_chunk(
        self, chunk_id: str, text: str, updated_at: float, vector: Sequence[float]
    ) -> bool:
        conn = self.db.conn
        with self.db.lock, self.db.atomic():
            table = self._table_in_use()
            row = conn.execute(
                "SELECT n, owner FROM longterm_chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                "UPDATE longterm_chunks SET text = ?, updated_at = ? WHERE n = ?",
                (text, updated_at, row[0]),
            )
            # vec0 rows are replaced, not updated (partition keys cannot change in place)
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (row[0],))
            conn.execute(
                f"INSERT INTO {table}(rowid, owner, embedding) VALUES (?, ?, ?)",
                (row[0], row[1], _blob(vector)),
            )
        return True

    def delete_chunk(self, chunk_id: str) -> bool:
        conn = self.db.conn
        with self.db.lock, self.db.atomic():
            row = conn.execute("SELECT n FROM longterm_chunks WHERE id = ?", (chunk_id,)).fetchone()
            if row is None:
                return False
            table = self.table
            if table is not None and self._has_table(table):
                conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (row[0],))
            conn.execute("DELETE FROM longterm_chunks WHERE n = ?", (row[0],))
        return True

    def nearest_chunks(
        self, vector: Sequence[float], owners: Sequence[str], k: int
    ) -> list[tuple[Chunk, float]]:
        if k <= 0 or not owners:
            return []
        conn = self.db.conn
        blob = _blob(vector)
        found: list[tuple[float, int]] = []
        with self.db.lock:
            table = self._table_in_use()
            for owner in dict.fromkeys(owners):  # one vec0 KNN per partition
                found.extend(self._partition_knn(table, blob, owner, k))
            found.sort()
            best = found[:k]
            if not best:
                return []
            marks = ",".join("?" * len(best))
            rows = conn.execute(
                f"SELECT n, {CHUNK_COLUMNS} FROM longterm_chunks WHERE n IN ({marks})",
                [n for _, n in best],
            ).fetchall()
        by_n = {int(r[0]): chunk_from_row(r) for r in rows}
        return [(by_n[n], 1.0 - dist) for dist, n in best if n in by_n]

    def _partition_knn(
        self, table: str, blob: bytes, owner: str, k: int
    ) -> list[tuple[float, int]]:
        """The k nearest rows of one partition with a cosine distance.

        A zero vector has no cosine (vec0 gives NaN) and vec0 may rank it among the k it
        returns, hiding a real neighbour: ask again for more until k real ones are found
        or the partition is exhausted (one query when no zero vector is near the top)."""
        asked = k
        while True:
            rows = self.db.conn.execute(
                f"SELECT rowid, distance FROM {table} "
                f"WHERE embedding MATCH ? AND k = ? AND owner = ?",
                (blob, asked, owner),
            ).fetchall()
            real = [
                (float(r[1]), int(r[0])) for r in rows if r[1] is not None and not math.isnan(r[1])
            ]
            if len(real) >= k or len(rows) < asked:
                return real[:k]
            asked *= 2

    def export_chunks(self) -> Iterator[StoredChunk]:
        with self.db.lock:
            table = self.table
            if table is None or not self._has_table(table):
                vectors: dict[int, bytes] = {}
            else:
                vectors = {
                    int(r[0]): bytes(r[1])
                    for r in self.db.conn.execute(f"SELECT rowid, embedding FROM {table}")
                }
            rows = self.db.conn.execute(
                f"SELECT n, owner, {CHUNK_COLUMNS} FROM longterm_chunks ORDER BY n"
            ).fetchall()
        for r in rows:
            blob = vectors.get(int(r[0]), b"")
            vector = struct.unpack(f"{len(blob) // 4}f", blob)
            yield StoredChunk(chunk_from_row(r), str(r[1]), tuple(vector))

    def chunk_counts(self) -> tuple[int, int]:
        with self.db.lock:
            rows = int(self.db.conn.execute("SELECT count(*) FROM longterm_chunks").fetchone()[0])
            table = self.table
            if table is None or not self._has_table(table):
                return rows, 0
            vectors = int(self.db.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        return rows, vectors


__all__ = ["SqliteLongTermStore", "vec_table"]
