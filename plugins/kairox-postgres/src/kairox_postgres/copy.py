"""``kairox db copy``: a whole database from SQLite to PostgreSQL, or back, nothing lost.

Rows are copied as they are (seqs, ids, timestamps and event JSON kept; row order kept
where it breaks ties), in one transaction on the target, which must hold no events,
memories or proposals yet. Afterwards both sides are read again and compared: event
count and seq list per session, a digest of every event's JSON, memories, each key's
history and proposals by status. Long-term chunks (with their vectors, as they are:
nothing is re-embedded), the vector space, personal packs and pack activations move
through each side's ``LongTermStore`` and are compared the same way; the retrieval
index (every space's documents, chunks and vectors: copy_index.py) moves too and is
compared per space.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from psycopg.types.json import Jsonb

from kairox_core.errors import KairoxUserError
from kairox_core.store import SqliteStorage
from kairox_core.store.protocol import LongTermStore
from kairox_postgres import copy_index
from kairox_postgres.storage import PostgresStorage

# (table, columns, order): what moves, oldest first. memory_history's own ids are not
# kept (the target numbers them), but its order is, and that is all reads rely on.
TABLES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "sessions",
        (
            "session_id",
            "workspace_id",
            "profile",
            "created_at",
            "last_seq",
            "event_count",
            "archived_at",
        ),
        "session_id",
    ),
    (
        "events",
        ("session_id", "seq", "type", "version", "created_at", "data"),
        "session_id, seq",
    ),
    ("recall_progress", ("session_id", "last_seq", "low_seq"), "session_id"),
    (
        "memories",
        (
            "id",
            "scope",
            "owner",
            "key",
            "body",
            "workspace_id",
            "session_id",
            "created_at",
            "updated_at",
            "approved_at",
            "prov_session_id",
            "prov_turn_id",
            "prov_raw",
        ),
        "{order}",
    ),
    (
        "memory_history",
        (
            "memory_id",
            "scope",
            "owner",
            "key",
            "body",
            "valid_from",
            "replaced_at",
            "ended",
            "approved_at",
            "prov_session_id",
            "prov_turn_id",
            "prov_raw",
        ),
        "id",
    ),
    (
        "memory_proposals",
        (
            "id",
            "scope",
            "owner",
            "key",
            "body",
            "workspace_id",
            "session_id",
            "turn_id",
            "raw",
            "tainted",
            "source",
            "created_at",
            "status",
            "resolved_at",
            "reason",
            "supersedes",
            "superseded_by",
            "memory_id",
            "final_body",
        ),
        "{order}",
    ),
)
BATCH = 2000
# SQLite-only tables: reported, not copied (none left: every table moves).
SQLITE_ONLY: tuple[str, ...] = ()


class CopyError(KairoxUserError):
    """The copy cannot start (a non-empty target) or did not arrive whole."""


class _Side(Protocol):
    label: str
    longterm: LongTermStore
    sqlite: bool  # which SQL the retrieval index's copy speaks (copy_index.py)

    def rows(self, table: str, columns: Sequence[str], order: str) -> Iterator[tuple[Any, ...]]: ...
    def insert(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None: ...
    def count(self, table: str) -> int: ...
    def transaction(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...


class _Sqlite:
    sqlite = True

    def __init__(self, path: str) -> None:
        self.storage = SqliteStorage(path.removeprefix("sqlite:///"))
        self.label = self.storage.location
        self.longterm: LongTermStore = self.storage.longterm
        self.conn = self.storage.db.conn

    def rows(self, table: str, columns: Sequence[str], order: str) -> Iterator[tuple[Any, ...]]:
        order = order.format(order="rowid")
        cur = self.conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
        for row in cur:
            yield tuple(row)

    def insert(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        if table == "events":  # from PostgreSQL: a document; from SQLite: its text already
            rows = [(*r[:5], r[5] if isinstance(r[5], str) else _json_text(r[5])) for r in rows]
        elif table == "memory_proposals":
            at = list(columns).index("tainted")
            rows = [(*r[:at], int(r[at]), *r[at + 1 :]) for r in rows]
        marks = ", ".join("?" * len(columns))
        self.conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def others(self) -> dict[str, int]:
        """Rows in the SQLite-only tables, by table (none today: kept for the next table
        the PostgreSQL schema does not have yet)."""
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        names = [r[0] for r in self.conn.execute(query)]
        counts = {}
        for name in names:
            if name in SQLITE_ONLY:
                n = self.count(name)
                if n:
                    counts[name] = n
        return counts

    def transaction(self) -> AbstractContextManager[Any]:
        return self.storage.atomic()

    def close(self) -> None:
        self.storage.close()


class _Postgres:
    sqlite = False

    def __init__(self, url: str) -> None:
        self.storage = PostgresStorage(url, max_connections=2)
        self.label = self.storage.location
        self.longterm: LongTermStore = self.storage.longterm
        self.db = self.storage.db

    def rows(self, table: str, columns: Sequence[str], order: str) -> Iterator[tuple[Any, ...]]:
        order = order.format(order="n")
        with (
            self.db.connection() as conn,
            conn.transaction(),  # a server-side (named) cursor lives in a transaction
            conn.cursor(name=f"kx_copy_{table}") as cur,
        ):
            cur.itersize = BATCH
            cur.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
            for row in cur:
                yield tuple(row.values())

    def insert(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        if table == "events":
            rows = [(*r[:5], Jsonb(json.loads(r[5]))) for r in rows]
        elif table == "memory_proposals":
            at = list(columns).index("tainted")
            rows = [(*r[:at], bool(r[at]), *r[at + 1 :]) for r in rows]
        marks = ", ".join(["%s"] * len(columns))
        with self.db.connection() as conn, conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    def count(self, table: str) -> int:
        return int(self.db.execute(f"SELECT count(*) AS n FROM {table}")[0]["n"])

    def transaction(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    def close(self) -> None:
        self.storage.close()


def _open(target: str) -> _Sqlite | _Postgres:
    if "://" in target and not target.startswith("sqlite:///"):
        return _Postgres(target)
    return _Sqlite(str(Path(target).expanduser()))


@dataclass
class CopyReport:
    """What was copied and what the comparison afterwards found."""

    source: str
    target: str
    copied: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    not_copied: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"copied {self.source} -> {self.target}"]
        out += [f"  {table}: {n}" for table, n in self.copied.items()]
        out.append(f"  verified: {self.sessions} sessions' seqs and event digests, memories, ")
        out[-1] += (
            "histories, proposals, long-term chunks with their vectors, packs and index "
            "spaces match"
        )
        for table, n in self.not_copied.items():
            out.append(f"  not copied (not on PostgreSQL yet): {table}: {n} rows")
        return out


def copy_database(source: str, target: str) -> CopyReport:
    """Copy every row of ``source`` into the empty ``target``, then compare the two."""
    src = _open(source)
    try:
        dst = _open(target)
        try:
            return _copy(src, dst)
        finally:
            dst.close()
    finally:
        src.close()


def _copy(src: _Side, dst: _Side) -> CopyReport:
    busy = {t: dst.count(t) for t in ("events", "memories", "memory_proposals")}
    busy.update(_longterm_busy(dst.longterm))
    if any(busy.values()):
        held = ", ".join(f"{n} {t}" for t, n in busy.items() if n)
        raise CopyError(f"{dst.label} is not empty ({held}); copy into a new database")
    report = CopyReport(src.label, dst.label)
    copy_index.prepare(src, dst)
    with dst.transaction():
        for table, columns, order in TABLES:
            n, batch = 0, []
            for row in src.rows(table, columns, order):
                batch.append(row)
                if len(batch) >= BATCH:
                    dst.insert(table, columns, batch)
                    n, batch = n + len(batch), []
            if batch:
                dst.insert(table, columns, batch)
                n += len(batch)
            report.copied[table] = n
        report.copied.update(_copy_longterm(src.longterm, dst.longterm))
        report.copied.update(copy_index.copy_index(src, dst))
        report.sessions = _verify(src, dst)  # inside: a mismatch leaves the target empty
        _verify_longterm(src, dst)
        copy_index.verify(src, dst)
    if isinstance(src, _Sqlite) and isinstance(dst, _Postgres):
        report.not_copied = src.others()
    return report


def _fingerprint(side: _Side) -> dict[str, Any]:
    """Everything the comparison looks at, independent of the backend's storage format."""
    sessions: dict[str, list[Any]] = {}
    for sid, seq, data in side.rows("events", ("session_id", "seq", "data"), "session_id, seq"):
        doc = json.loads(data) if isinstance(data, str) else data
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
        sessions.setdefault(sid, []).append((int(seq), digest))
    rest = {
        table: [tuple(_plain(v) for v in row) for row in side.rows(table, columns, order)]
        for table, columns, order in TABLES
        if table != "events"
    }
    return {"events": sessions, **rest}


def _json_text(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _verify(src: _Side, dst: _Side) -> int:
    a, b = _fingerprint(src), _fingerprint(dst)
    for part in a:
        if a[part] != b[part]:
            raise CopyError(
                f"the copy in {dst.label} differs from {src.label} in {part}; nothing was written"
            )
    return len(a["events"])


# --- long-term chunks and packs, through each side's LongTermStore ----------------------


def _longterm_busy(store: LongTermStore) -> dict[str, int]:
    return {
        "long-term chunks": store.chunk_counts()[0],
        "personal packs": len(store.list_packs()),
        "pack activations": len(store.activations()),
    }


def _no_embedding(texts: Sequence[str]) -> list[list[float]]:
    raise CopyError("the target has long-term chunks already; copy into a new database")


def _copy_longterm(src: LongTermStore, dst: LongTermStore) -> dict[str, int]:
    """Chunks with their vectors (the source's space, nothing re-embedded), packs and
    activations; counts by table."""
    space = src.vector_space()
    if space is not None:
        dst.use_space(space[0], space[1], _no_embedding)  # the target is empty
    chunks, batch = 0, []
    for stored in src.export_chunks():
        if space is None or len(stored.vector) != space[1]:
            raise CopyError(
                f"long-term chunk {stored.chunk.id} has no vector of the recorded space "
                f"{space}; open the source with Kairox once (it re-embeds), then copy"
            )
        batch.append((stored.chunk, stored.owner, stored.vector))
        if len(batch) >= BATCH:
            dst.insert_chunks(batch)
            chunks, batch = chunks + len(batch), []
    if batch:
        dst.insert_chunks(batch)
        chunks += len(batch)
    packs = src.list_packs()
    for row in packs:
        dst.insert_pack(row)
    activations = src.activations()
    for a in activations:
        dst.activate_pack(a.workspace_id, a.name, a.activated_at)
    return {
        "longterm_chunks": chunks,
        "packs_personal": len(packs),
        "pack_activations": len(activations),
    }


def _longterm_fingerprint(store: LongTermStore) -> dict[str, Any]:
    rows, vectors = store.chunk_counts()
    return {
        "long-term vector space": store.vector_space(),
        "long-term counts": (rows, vectors),
        "long-term chunks": [(s.chunk, s.owner, s.vector) for s in store.export_chunks()],
        "personal packs": store.list_packs(),
        "pack activations": store.activations(),
    }


def _verify_longterm(src: _Side, dst: _Side) -> None:
    a, b = _longterm_fingerprint(src.longterm), _longterm_fingerprint(dst.longterm)
    for part in a:
        if a[part] != b[part]:
            raise CopyError(
                f"the copy in {dst.label} differs from {src.label} in {part}; nothing was written"
            )


__all__ = ["CopyError", "CopyReport", "copy_database"]
