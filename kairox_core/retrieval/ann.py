"""An approximate nearest-neighbour index over one space's vectors: a cache of SQLite.

sqlite-vec's ``vec0`` KNN is an exact scan of the space: its cost grows with the
space, paid by every recall search. Above ``ANN_MIN`` vectors a space is searched in
an HNSW graph (usearch) instead, whose cost barely grows with the space.
Up to ``EXACT_MAX`` vectors the graph's own (f16, memory-mapped) vectors are scanned
whole rather than walked: as fast or faster there, and exact.

SQLite stays the truth; the graph is rebuilt or caught up from it, never trusted
blindly. Every vector write of a space is logged in ``rag_vec_log`` in the same
transaction (``op`` 1 added, 0 deleted, 2 reset: the whole space re-embedded). The
graph covers the log up to an id ``upto``; the entries after it (written by any
process) are applied before each search: an added vector goes into a small ``delta``
searched exactly, a deleted or replaced one is hidden from the graph (``hidden``).
When the delta outgrows ``DELTA_MAX`` a worker thread merges it into a new graph.

On disk a graph is ``<db>-ann/<db uuid>/<space hash>-<dim>-<upto>-<chunk id>.usearch``
(written to a temporary name, then renamed: a reader sees a whole file or none; it is
memory-mapped, so opening one costs about a millisecond). It is used only if the log
still holds entry ``upto`` for that chunk and no reset since; a missing, stale or
unreadable file is rebuilt in the background while searches scan exactly. usearch
(with numpy) is optional: without it every search is the exact scan.

Graph settings (connectivity 32, search expansion 256) were chosen on SciFact with
the hashing backend against the exact scan (``benchmarks/bench_ann.py``): the smaller
connectivity 16 / expansion 128 lost much of the recall. The graph keeps its vectors as
f16 (SQLite keeps the f32 truth): about the recall of f32 in half the memory, so a
search that misses the CPU caches (every turn's) reads less; i8 lost recall. The
figures: docs/results.md.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox_core.store.database import on_close

log = logging.getLogger(__name__)

ANN_MIN = 2048  # smaller spaces are scanned exactly (vec0): the results stay exact
DELTA_MAX = 1024  # vectors searched exactly beside the graph before a merge
MEMO_MAX = 4096  # vectors this process wrote, kept for the next catch-up
POINT_READS = 64  # a catch-up reading at most this many vectors reads them by rowid
RETRY_AFTER = 60.0  # seconds before a failed build is tried again
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 256  # raised to the number of results asked for, when more
# A graph of at most this many vectors is scanned whole instead of walked: a walk with
# expansion 256 reads most of such a graph anyway: the scan was faster up to about
# this size and the walk beyond it (docs/results.md). And the scan is exact.
EXACT_MAX = 16_384

LOG_SCHEMA = """
CREATE TABLE rag_vec_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    chunk_id INTEGER,
    op INTEGER NOT NULL
);
CREATE INDEX rag_vec_log_space ON rag_vec_log(workspace_id, dimension, id);
CREATE INDEX rag_vec_log_resets ON rag_vec_log(workspace_id, dimension, id) WHERE op = 2;
CREATE TABLE rag_ann_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO rag_ann_meta(key, value) VALUES ('uuid', lower(hex(randomblob(16))));
"""
ADD, DELETE, RESET = 1, 0, 2


def available() -> bool:
    """usearch and numpy import, and ``KAIROX_ANN`` is not ``0`` (the ANN path is on)."""
    return os.environ.get("KAIROX_ANN", "1") != "0" and _importable()


@functools.cache
def _importable() -> bool:
    try:
        import numpy  # noqa: F401
        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


def log_added(conn: Any, space: str, dim: int, chunk_id: int) -> int:
    """Inside the write's transaction: the chunk's vector was stored. Its log id."""
    cur = conn.execute(
        "INSERT INTO rag_vec_log(workspace_id, dimension, chunk_id, op) VALUES (?, ?, ?, 1)",
        (space, dim, chunk_id),
    )
    return int(cur.lastrowid)


def log_deleted_document(conn: Any, space: str, dim: int, document_id: int) -> None:
    """Inside the write's transaction, before the chunk rows go: their vectors went."""
    conn.execute(
        "INSERT INTO rag_vec_log(workspace_id, dimension, chunk_id, op) "
        "SELECT ?, ?, id, 0 FROM rag_chunks WHERE document_id = ?",
        (space, dim, document_id),
    )


def log_reset(conn: Any, space: str, dim: int) -> None:
    """Inside the rebuild's transaction: every vector of the space was replaced."""
    conn.execute(
        "INSERT INTO rag_vec_log(workspace_id, dimension, chunk_id, op) VALUES (?, ?, NULL, 2)",
        (space, dim),
    )


class AnnSpace:
    """One space's graph, delta and hidden ids, for one connection (one process)."""

    def __init__(self, conn: Any, lock: threading.RLock, space: str, dim: int) -> None:
        self.conn = conn
        self.lock = lock  # the connection's lock: held for every SQL statement
        self.space = space
        self.dim = dim
        self.table = f"rag_vec_{dim}"
        self.graph: Any = None  # usearch Index (memory-mapped, read-only) or None
        self.upto = 0  # log id the graph covers
        self.applied = 0  # log id applied to graph + delta + hidden
        self.delta: dict[int, Any] = {}  # chunk id -> normalised vector (numpy)
        self.hidden: set[int] = set()  # graph entries deleted or replaced since
        self.size = 0  # vectors in the space while it has no graph
        self.loaded = False  # a file was looked for
        self.worker: threading.Thread | None = None
        self.directory = _directory(conn)
        self._matrix: tuple[list[int], Any] | None = None
        self._memo: dict[int, bytes] = {}  # log id -> vector this process wrote
        self.builds = 0  # graphs built by this process (tests, stats)
        self._retry_at = 0.0  # monotonic time before which no build is started again

    # --- the log -----------------------------------------------------------------

    def _head(self) -> tuple[int, int]:
        """(last log id, last reset id) of the space."""
        key = (self.space, self.dim)
        (head,) = self.conn.execute(
            "SELECT max(id) FROM rag_vec_log WHERE workspace_id = ? AND dimension = ?", key
        ).fetchone()
        (reset,) = self.conn.execute(
            "SELECT max(id) FROM rag_vec_log WHERE workspace_id = ? AND dimension = ? AND op = 2",
            key,
        ).fetchone()
        return int(head or 0), int(reset or 0)

    def _count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM rag_chunks WHERE workspace_id = ?", (self.space,)
        ).fetchone()
        return int(row[0])

    # --- searching ---------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """A graph is in use (the next search is likely approximate)."""
        return self.graph is not None

    def search(self, qvec: Sequence[float], limit: int) -> list[tuple[int, float]] | None:
        """(chunk id, cosine distance) of about the ``limit`` nearest vectors, nearest
        first; None when the space is small or has no graph yet (scan it exactly).
        Call with ``lock`` held."""
        head, reset = self._head()
        if not self.loaded:
            self.loaded = True
            self._load(head, reset)
            if self.graph is None:
                self.size, self.applied = self._count(), head
        if self.graph is not None and reset > self.upto:  # re-embedded since the graph
            self._drop()
            self.size, self.applied = self._count(), head
        if self.graph is None:
            if head != self.applied:  # a small space that changed: count it again
                self.size, self.applied = self._count(), head
            if self.size >= ANN_MIN:
                self._start_worker()
            return None
        if head > self.applied:
            self._catch_up(head)
        if len(self.delta) > DELTA_MAX or len(self.hidden) > DELTA_MAX:
            self._start_worker()
        return self._nearest(qvec, limit)

    def _nearest(self, qvec: Sequence[float], limit: int) -> list[tuple[int, float]]:
        import numpy as np

        q = np.array(qvec, dtype=np.float32)  # a copy: the caller's vector stays as it was
        q /= float(np.linalg.norm(q)) or 1.0
        want = limit + len(self.hidden)
        graph = self.graph
        scan = len(graph) <= EXACT_MAX
        if not scan:
            graph.expansion_search = max(EXPANSION_SEARCH, want)
        found = graph.search(q, want, threads=1, exact=scan)
        hidden = self.hidden
        out = [
            (k, d)
            for k, d in zip(found.keys.tolist(), found.distances.tolist(), strict=True)
            if k not in hidden
        ]
        if self.delta:
            if self._matrix is None:
                ids = list(self.delta)
                self._matrix = (ids, np.stack([self.delta[i] for i in ids]))
            ids, matrix = self._matrix
            dist = 1.0 - matrix @ q
            out += [(i, float(d)) for i, d in zip(ids, dist.tolist(), strict=True)]
            out.sort(key=lambda t: t[1])
        return out[:limit]

    def _catch_up(self, head: int) -> None:
        """Apply the log entries after ``applied`` (any process's writes)."""

        rows = self.conn.execute(
            "SELECT id, chunk_id, op FROM rag_vec_log WHERE workspace_id = ? AND dimension = ? "
            "AND id > ? AND id <= ? ORDER BY id",
            (self.space, self.dim, self.applied, head),
        ).fetchall()
        vectors: dict[int, Any] = {}
        added = []
        for entry, chunk, op in rows:
            if op != ADD:
                continue
            blob = self._memo.pop(int(entry), None)
            if blob is None:
                added.append(int(chunk))
            else:
                _put(vectors, int(chunk), blob)
        if len(added) <= POINT_READS:
            # vec0 scans the whole space for ``rowid IN (...)`` but reads one row for
            # ``rowid = ?``: a few are read one by one
            sql = f"SELECT rowid, embedding FROM {self.table} WHERE rowid = ?"
            for chunk in added:
                row = self.conn.execute(sql, (chunk,)).fetchone()
                if row is not None:
                    _put(vectors, int(row[0]), bytes(row[1]))
            added = []
        for start in range(0, len(added), 500):
            part = added[start : start + 500]
            for rowid, blob in self.conn.execute(
                f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN "
                f"({','.join('?' * len(part))})",
                part,
            ):
                _put(vectors, int(rowid), bytes(blob))
        for _, chunk, op in rows:
            if op == RESET:  # only a graph older than the reset sees one: dropped above
                continue
            chunk = int(chunk)
            if self._in_graph(chunk):  # deleted, or its rowid reused: the graph's is stale
                self.hidden.add(chunk)
            self.delta.pop(chunk, None)
            if op == ADD and chunk in vectors:
                self.delta[chunk] = vectors[chunk]
        self._matrix = None
        self.applied = head

    def remember(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """Vectors this process has just committed, by log id: the catch-up takes them
        from here instead of reading them back. Bounded (the rest are read)."""
        if self.graph is None:
            return
        with self.lock:
            if len(self._memo) + len(entries) > MEMO_MAX:
                self._memo.clear()
            self._memo.update(entries)

    def _in_graph(self, chunk: int) -> bool:
        return self.graph is not None and bool(self.graph.contains(chunk))

    def _drop(self) -> None:
        self.graph, self.upto, self.applied = None, 0, 0
        self.delta, self.hidden, self._matrix = {}, set(), None

    # --- files -------------------------------------------------------------------

    def _prefix(self) -> str:
        digest = hashlib.sha1(self.space.encode("utf-8")).hexdigest()[:20]
        return f"{digest}-{self.dim}-"

    def _files(self) -> list[tuple[int, int, Path]]:
        """(upto, chunk id, path) of this space's graph files, newest first."""
        if self.directory is None or not self.directory.is_dir():
            return []
        out = []
        prefix = self._prefix()
        for path in self.directory.iterdir():
            name = path.name
            if not (name.startswith(prefix) and name.endswith(".usearch")):
                continue
            parts = name[len(prefix) : -len(".usearch")].split("-")
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                out.append((int(parts[0]), int(parts[1]), path))
        return sorted(out, reverse=True)

    def _valid(self, upto: int, chunk: int, head: int, reset: int) -> bool:
        """The file's log position is still in this database's log, after any reset."""
        if upto > head or upto < reset:
            return False
        if upto == 0:
            return True
        row = self.conn.execute(
            "SELECT chunk_id FROM rag_vec_log WHERE id = ? AND workspace_id = ? AND dimension = ?",
            (upto, self.space, self.dim),
        ).fetchone()
        return row is not None and int(row[0] or 0) == chunk

    def _load(self, head: int, reset: int) -> None:
        """The newest valid graph file, memory-mapped, caught up to ``head``."""
        from usearch.index import Index

        for upto, chunk, path in self._files():
            if not self._valid(upto, chunk, head, reset):
                continue
            try:
                graph = Index.restore(str(path), view=True)
            except Exception:  # unreadable (another version, a torn copy): rebuilt
                log.warning("ann: cannot read %s; rebuilding", path, exc_info=True)
                continue
            if graph is None or graph.ndim != self.dim:
                continue
            self._drop()
            self.graph, self.upto, self.applied = graph, upto, upto
            if head > upto:
                self._catch_up(head)
            return

    # --- building (a worker thread) ----------------------------------------------

    def _start_worker(self) -> None:
        if _stopping.is_set() or (self.worker is not None and self.worker.is_alive()):
            return
        if time.monotonic() < self._retry_at:  # the last build failed: not on every search
            return
        self.worker = threading.Thread(target=self._work, name="kairox-ann", daemon=True)
        _workers.add(self.worker)
        self.worker.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a build in progress (tests, bulk loads)."""
        worker = self.worker
        if worker is not None:
            worker.join(timeout)

    def _work(self) -> None:
        try:
            self.build()
        except _Stopped:
            pass
        except Exception:  # searches scan exactly meanwhile; a later one retries
            self._retry_at = time.monotonic() + RETRY_AFTER
            log.warning("ann: building the graph of %s failed", self.space, exc_info=True)
        finally:
            _workers.discard(threading.current_thread())

    def build(self, threads: int = 1) -> bool:
        """A new graph of the space, saved and installed: the current graph with the
        delta merged in when there is one (and no reset since), else built from the
        stored vectors. False when the space is below ``ANN_MIN``. ``threads``: the
        graph's insertion threads (0: every core; a bulk load's caller is waiting)."""
        import numpy as np
        from usearch.index import Index

        rows: list[Any] = []
        with self.lock:
            head, reset = self._head()
            base = self.graph if self.graph is not None and reset <= self.upto else None
            source = self._graph_path(self.upto) if base is not None else None
            if base is not None and source is None and self.directory is not None:
                base = None  # its file is gone (another process merged): a mapped graph
                # cannot be copied into a writable one, so build from the rows
            if base is not None:
                if head > self.applied:
                    self._catch_up(head)
                keep, hidden, upto = dict(self.delta), set(self.hidden), self.applied
            else:
                rows, upto = self._snapshot()
                if len(rows) < ANN_MIN:
                    self.size, self.applied = len(rows), upto
                    return False
                keep, hidden = {}, set()
            chunk = self._chunk_at(upto)
        graph: Any
        if base is not None:
            graph = Index.restore(str(source)) if source is not None else base.copy()
        else:
            graph = _new_index(self.dim)
            ids = np.fromiter((int(r[0]) for r in rows), dtype=np.uint64, count=len(rows))
            matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32)
            matrix = matrix.reshape(len(rows), self.dim)
            norms = np.linalg.norm(matrix, axis=1)
            nonzero = norms > 0  # an all-zero vector (no feature) never matches
            _add_in_steps(graph, ids[nonzero], matrix[nonzero] / norms[nonzero, None], threads)
            del rows, matrix
        present = [h for h in hidden if graph.contains(h)]
        if present:
            graph.remove(np.array(present, dtype=np.uint64))
        if keep:
            ids = np.array(list(keep), dtype=np.uint64)
            _add_in_steps(graph, ids, np.stack(list(keep.values())), threads)
        path = self._save(graph, upto, chunk)
        view = Index.restore(str(path), view=True) if path is not None else graph
        with self.lock:
            self.builds += 1
            self._install(view, upto)
            if path is not None:
                self._prune(upto)
        return True

    def _snapshot(self) -> tuple[list[Any], int]:
        """Every stored vector of the space and the log id they reflect, read in one
        transaction (a write from another process lands wholly before or after)."""
        conn = self.conn
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            head, _ = self._head()
            rows = conn.execute(
                f"SELECT rowid, embedding FROM {self.table} WHERE workspace_id = ?",
                (self.space,),
            ).fetchall()
        finally:
            if own:
                conn.execute("COMMIT")
        return rows, head

    def _chunk_at(self, upto: int) -> int:
        if upto == 0:
            return 0
        row = self.conn.execute("SELECT chunk_id FROM rag_vec_log WHERE id = ?", (upto,)).fetchone()
        return int(row[0] or 0) if row else 0

    def _install(self, graph: Any, upto: int) -> None:
        """Use ``graph`` (covering the log to ``upto``) and re-apply what came after."""
        head, reset = self._head()
        if reset > upto:  # re-embedded while building: this graph is already stale
            self._drop()
            self.size, self.applied = self._count(), head
            return
        self._drop()
        self.graph, self.upto, self.applied = graph, upto, upto
        if head > upto:
            self._catch_up(head)

    def _graph_path(self, upto: int) -> Path | None:
        if self.directory is None:
            return None
        for u, _, path in self._files():
            if u == upto:
                return path
        return None

    def _save(self, graph: Any, upto: int, chunk: int) -> Path | None:
        if self.directory is None:
            return None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            final = self.directory / f"{self._prefix()}{upto}-{chunk}.usearch"
            tmp = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            graph.save(str(tmp))
            os.replace(tmp, final)
            return final
        except OSError:  # a read-only folder: the graph lives in memory only
            log.warning("ann: cannot save the graph of %s", self.space, exc_info=True)
            return None

    def _prune(self, keep_upto: int) -> None:
        """Remove this space's older graph files (a process still mapping one keeps
        its pages: unlinking does not disturb it on POSIX)."""
        for upto, _, path in self._files():
            if upto < keep_upto:
                with contextlib.suppress(OSError):
                    path.unlink()


def _put(vectors: dict[int, Any], chunk: int, blob: bytes) -> None:
    import numpy as np

    vec = np.frombuffer(blob, dtype=np.float32)
    norm = float(np.linalg.norm(vec))
    if norm > 0:  # an all-zero vector (no feature) never matches
        vectors[chunk] = vec / norm


STEP = 512  # vectors added per call: a build stops between two at interpreter exit
_stopping = threading.Event()
_workers: set[threading.Thread] = set()


class _Stopped(Exception):
    """The interpreter is exiting: a build in a worker thread gives up."""


def _add_in_steps(graph: Any, ids: Any, matrix: Any, threads: int) -> None:
    """``graph.add`` a slice at a time, so a worker thread is never inside usearch for
    long: a daemon thread still in its C++ code when Python exits aborts the process."""
    for start in range(0, len(ids), STEP):
        if _stopping.is_set():
            raise _Stopped
        graph.add(ids[start : start + STEP], matrix[start : start + STEP], threads=threads)


@atexit.register
def _stop_workers() -> None:
    _stopping.set()
    for worker in list(_workers):
        worker.join(10)


def _new_index(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="cos",
        dtype="f16",  # half the memory a search walks (docs/results.md)
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def _directory(conn: Any) -> Path | None:
    """``<db>-ann/<db uuid>``: None for an in-memory database."""
    rows = conn.execute("PRAGMA database_list").fetchall()
    path = next((r[2] for r in rows if r[1] == "main"), "")
    if not path:
        return None
    row = conn.execute("SELECT value FROM rag_ann_meta WHERE key = 'uuid'").fetchone()
    if row is None:
        return None
    return Path(f"{path}-ann") / str(row[0])


_spaces: dict[tuple[int, str, int], tuple[Any, AnnSpace]] = {}
_spaces_lock = threading.Lock()


def space_for(conn: Any, lock: threading.RLock, space: str, dim: int) -> AnnSpace:
    """The connection's ``AnnSpace`` for ``space`` (shared by its index objects)."""
    key = (id(conn), space, dim)
    with _spaces_lock:
        entry = _spaces.get(key)
        if entry is not None and entry[0] is conn:
            return entry[1]
        for other in [k for k, (c, _) in _spaces.items() if not _alive(c)]:
            del _spaces[other]  # a closed connection's spaces (and their graphs) go
        ann = AnnSpace(conn, lock, space, dim)
        _spaces[key] = (conn, ann)
        return ann


def _alive(conn: Any) -> bool:
    try:
        conn.total_changes  # noqa: B018 - raises once the connection is closed
    except Exception:
        return False
    return True


def forget(conn: Any) -> None:
    """Drop the connection's spaces (it is being closed), their graphs freed now."""
    with _spaces_lock:
        gone = [_spaces.pop(k)[1] for k in [k for k, (c, _) in _spaces.items() if c is conn]]
    for space in gone:
        with space.lock:
            space._drop()


on_close(forget)
