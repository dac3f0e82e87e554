"""``kairox db copy``'s part for the workspace retrieval index (every space, recall too).

Spaces, documents and chunks move with their ids, text, hashes and vectors (float32
both sides: SQLite's vec0 blobs and pgvector's text round-trip exactly), so nothing is
re-embedded and a search after the copy ranks as before. Keyword data is rebuilt from
the text by each side's own index: FTS5's triggers on SQLite, FTS5's tokenizer and the
postings on PostgreSQL (the same terms, the same bm25). Afterwards each space's
documents, chunks and vectors are counted on both sides and digested.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from typing import Any

from kairox_core.store.indexing import metadata_json, migrate_sqlite_index, pack_vector
from kairox_postgres.index import _vector_text, fts5_terms, insert_postings

BATCH = 1000
_DOC_COLUMNS = (
    "id",
    "workspace_id",
    "doc_id",
    "origin",
    "doc_type",
    "path",
    "title",
    "metadata",
    "content_hash",
    "mtime",
    "size",
    "updated_at",
)
_CHUNK_COLUMNS = (
    "id",
    "document_id",
    "workspace_id",
    "ord",
    "text",
    "heading",
    "tokens",
    "content_hash",
    "context",
)


def _is_sqlite(side: Any) -> bool:
    return bool(side.sqlite)  # each side of a copy says which it is (copy.py)


def _sqlite_has_index(conn: Any) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'rag_documents'").fetchone()
    return row is not None


def _sqlite_vec_table(conn: Any, dim: int) -> bool:
    name = f"rag_vec_{int(dim)}"
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None
    )


def prepare(src: Any, dst: Any) -> None:
    """Before the copy's transaction: the target's index tables exist and are empty."""
    from kairox_postgres.copy import CopyError

    if _is_sqlite(dst):
        migrate_sqlite_index(dst.conn)
    n = _documents(dst)
    if n:
        raise CopyError(f"{dst.label} is not empty ({n} indexed documents); copy into a new one")


def _documents(side: Any) -> int:
    if _is_sqlite(side):
        if not _sqlite_has_index(side.conn):
            return 0
        return int(side.conn.execute("SELECT count(*) FROM rag_documents").fetchone()[0])
    return int(side.db.execute("SELECT count(*) AS n FROM rag_documents")[0]["n"])


def _spaces(side: Any) -> list[tuple[str, str, int, float]]:
    if _is_sqlite(side):
        if not _sqlite_has_index(side.conn):
            return []
        rows = side.conn.execute(
            "SELECT workspace_id, backend, dimension, updated_at FROM rag_spaces "
            "ORDER BY workspace_id"
        ).fetchall()
        return [(r[0], r[1], int(r[2]), float(r[3])) for r in rows]
    rows = side.db.execute(
        "SELECT workspace_id, backend, dimension, updated_at FROM rag_spaces ORDER BY workspace_id"
    )
    return [(r["workspace_id"], r["backend"], int(r["dimension"]), r["updated_at"]) for r in rows]


def _document_rows(side: Any) -> Iterator[tuple[Any, ...]]:
    """Documents by id, metadata as the SQLite index stores it (sorted JSON text)."""
    cols = ", ".join(_DOC_COLUMNS)
    if _is_sqlite(side):
        if _sqlite_has_index(side.conn):
            yield from (
                tuple(r) for r in side.conn.execute(f"SELECT {cols} FROM rag_documents ORDER BY id")
            )
        return
    for r in side.rows("rag_documents", _DOC_COLUMNS, "id"):
        meta = r[7] if isinstance(r[7], dict) else json.loads(r[7])
        yield (*r[:7], metadata_json(meta), *r[8:])


def _chunk_rows(side: Any, space: str, dim: int) -> Iterator[tuple[tuple[Any, ...], bytes | None]]:
    """A space's chunks by id, each with its vector as float32 bytes (None: none)."""
    cols = ", ".join(f"c.{c}" for c in _CHUNK_COLUMNS)
    if _is_sqlite(side):
        conn = side.conn
        if _sqlite_vec_table(conn, dim):
            sql = (
                f"SELECT {cols}, v.embedding FROM rag_chunks c LEFT JOIN rag_vec_{int(dim)} v "
                "ON v.rowid = c.id WHERE c.workspace_id = ? ORDER BY c.id"
            )
        else:
            sql = f"SELECT {cols}, NULL FROM rag_chunks c WHERE c.workspace_id = ? ORDER BY c.id"
        for r in conn.execute(sql, (space,)):
            yield tuple(r[:-1]), (bytes(r[-1]) if r[-1] is not None else None)
        return
    with (
        side.db.connection() as pg,
        pg.transaction(),
        pg.cursor(name="kx_copy_rag_chunks") as cur,
    ):
        cur.itersize = BATCH
        cur.execute(
            f"SELECT {cols}, c.embedding::text AS e FROM rag_chunks c WHERE c.workspace_id = %s "
            "ORDER BY c.id",
            (space,),
        )
        for row in cur:
            values = tuple(row.values())
            e = values[-1]
            yield values[:-1], (pack_vector(json.loads(e)) if e is not None else None)


def copy_index(src: Any, dst: Any) -> dict[str, int]:
    """Inside the copy's transaction: every space's rows into ``dst``; counts copied."""
    spaces = _spaces(src)
    copied = {"rag_spaces": len(spaces), "rag_documents": 0, "rag_chunks": 0}
    if not spaces:
        return copied
    _insert_spaces(dst, spaces)
    docs: list[tuple[Any, ...]] = []
    kinds: dict[int, tuple[str, str]] = {}  # document id -> (doc_type, path), for vec0
    for row in _document_rows(src):
        docs.append(row)
        kinds[int(row[0])] = (row[4], row[5])
        if len(docs) >= BATCH:
            _insert_documents(dst, docs)
            copied["rag_documents"] += len(docs)
            docs = []
    if docs:
        _insert_documents(dst, docs)
        copied["rag_documents"] += len(docs)
    for space, _, dim, _ in spaces:
        batch: list[tuple[tuple[Any, ...], bytes | None]] = []
        for item in _chunk_rows(src, space, dim):
            batch.append(item)
            if len(batch) >= BATCH:
                _insert_chunks(dst, space, dim, batch, kinds)
                copied["rag_chunks"] += len(batch)
                batch = []
        if batch:
            _insert_chunks(dst, space, dim, batch, kinds)
            copied["rag_chunks"] += len(batch)
    if not _is_sqlite(dst):
        with dst.db.connection() as conn:
            for table in ("rag_documents", "rag_chunks"):
                conn.execute(  # the copied ids are taken: new rows number after them
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"greatest((SELECT max(id) FROM {table}), 1))"
                )
            for dim in sorted({s[2] for s in spaces}):
                conn.execute("SELECT kx_rag_hnsw(%s)", (dim,))
    return copied


def _insert_spaces(dst: Any, spaces: list[tuple[str, str, int, float]]) -> None:
    if _is_sqlite(dst):
        dst.conn.executemany(
            "INSERT INTO rag_spaces (workspace_id, backend, dimension, updated_at) "
            "VALUES (?, ?, ?, ?)",
            spaces,
        )
        for dim in sorted({s[2] for s in spaces}):
            dst.conn.execute(  # as WorkspaceRagIndex._ensure_space makes it
                f"CREATE VIRTUAL TABLE IF NOT EXISTS rag_vec_{int(dim)} USING vec0("
                f" workspace_id TEXT PARTITION KEY, embedding float[{int(dim)}] "
                "distance_metric=cosine, doc_type TEXT, path TEXT)"
            )
        return
    with dst.db.connection() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO rag_spaces (workspace_id, backend, dimension, updated_at) "
            "VALUES (%s, %s, %s, %s)",
            spaces,
        )


def _insert_documents(dst: Any, rows: list[tuple[Any, ...]]) -> None:
    cols = ", ".join(_DOC_COLUMNS)
    if _is_sqlite(dst):
        marks = ", ".join("?" * len(_DOC_COLUMNS))
        dst.conn.executemany(f"INSERT INTO rag_documents ({cols}) VALUES ({marks})", rows)
        return
    marks = ", ".join("%s::jsonb" if c == "metadata" else "%s" for c in _DOC_COLUMNS)
    with dst.db.connection() as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO rag_documents ({cols}) VALUES ({marks})", rows)


def _insert_chunks(
    dst: Any,
    space: str,
    dim: int,
    batch: list[tuple[tuple[Any, ...], bytes | None]],
    kinds: dict[int, tuple[str, str]],
) -> None:
    cols = ", ".join(_CHUNK_COLUMNS)
    rows = [r for r, _ in batch]
    if _is_sqlite(dst):
        marks = ", ".join("?" * len(_CHUNK_COLUMNS))
        dst.conn.executemany(f"INSERT INTO rag_chunks ({cols}) VALUES ({marks})", rows)
        dst.conn.executemany(
            f"INSERT INTO rag_vec_{int(dim)} (rowid, workspace_id, embedding, doc_type, path) "
            "VALUES (?, ?, ?, ?, ?)",
            [(r[0], space, v, *kinds[int(r[1])]) for r, v in batch if v is not None],
        )
        return
    counts = fts5_terms().chunks([(r[4], r[5]) for r in rows])
    marks = ", ".join(["%s"] * len(_CHUNK_COLUMNS))
    with dst.db.connection() as conn:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO rag_chunks ({cols}, embedding, kw_len) "
                f"VALUES ({marks}, %s::vector, %s)",
                [
                    (*r, _vector_text(_floats(v)) if v is not None else None, tc.length)
                    for (r, v), tc in zip(batch, counts, strict=True)
                ],
            )
        insert_postings(
            conn,
            space,
            [(int(r[0]), int(r[1]), tc) for r, tc in zip(rows, counts, strict=True)],
        )


def _floats(blob: bytes) -> list[float]:
    return list(struct.unpack(f"{len(blob) // 4}f", blob))


def fingerprint(side: Any) -> dict[str, tuple[int, int, int, str]]:
    """Per space: documents, chunks, vectors and a digest of them all (text, hashes,
    metadata and the vectors' float32 bytes), whatever the engine."""
    out: dict[str, tuple[int, int, int, str]] = {}
    docs: dict[str, list[tuple[Any, ...]]] = {}
    for row in _document_rows(side):
        docs.setdefault(row[1], []).append((row[0], row[2], row[4], row[5], row[7], row[8]))
    for space, backend, dim, _ in _spaces(side):
        digest = hashlib.sha256(f"{backend}\x00{dim}".encode())
        for d in docs.get(space, []):
            digest.update(repr(d).encode())
        chunks = vectors = 0
        for row, vec in _chunk_rows(side, space, dim):
            chunks += 1
            digest.update(repr(row).encode())
            if vec is not None:
                vectors += 1
                digest.update(vec)
        out[space] = (len(docs.get(space, [])), chunks, vectors, digest.hexdigest()[:16])
    return out


def verify(src: Any, dst: Any) -> None:
    """Raise ``CopyError`` unless both sides hold the same index rows (and, on
    PostgreSQL, the keyword statistics count every copied chunk)."""
    from kairox_postgres.copy import CopyError

    a, b = fingerprint(src), fingerprint(dst)
    if a != b:
        spaces = sorted(s for s in set(a) | set(b) if a.get(s) != b.get(s))
        raise CopyError(
            f"the copy in {dst.label} differs from {src.label} in the retrieval index "
            f"(spaces: {', '.join(spaces)}); nothing was written"
        )
    if not _is_sqlite(dst) and a:
        kept = {
            r["workspace_id"]: int(r["chunks"])
            for r in dst.db.execute("SELECT workspace_id, chunks FROM rag_kw_spaces")
        }
        for space, (_, chunks, _, _) in a.items():
            if kept.get(space, 0) != chunks:
                raise CopyError(f"keyword statistics of '{space}' do not count its chunks")


__all__ = ["copy_index", "fingerprint", "prepare", "verify"]
