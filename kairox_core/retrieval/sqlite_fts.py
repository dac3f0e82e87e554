"""The ``sqlite_fts`` knowledge-base kind: FTS5 bm25 over a SQLite database file.

The configured ``table`` is either an FTS5 table, searched directly, or an ordinary
table with an external-content FTS5 index ``<table>_fts`` beside it. ``kairox kb
index ID [PATH...]`` builds that index (and, with paths, the table itself, one row
per file). Options (``[knowledge_bases.<id>]``)::

    kind = "sqlite_fts"
    path = "docs.db"            # the database file
    table = "documents"
    text_columns = ["text"]     # searched and returned
    id_column = "id"
    title_column = "title"      # optional
    metadata_columns = ["category"]  # returned, and usable as filters
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import (
    IndexProgress,
    IndexReport,
    RetrievalHit,
    RetrieverConfigError,
    RetrieverError,
)
from kairox_core.retrieval.files import scan_files
from kairox_core.retrieval.fts import fts_match_expression
from kairox_core.retrieval.sqlite_fts_options import SqliteFtsOptions
from kairox_core.retrieval.threads import run_blocking
from kairox_core.store.connection import OperationalError, connect, transaction

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig

# A query waits this share of the source's timeout for a lock held by a writer (not
# the store's 30 s): the turn has given up by then anyway, and the error says why.
BUSY_SHARE = 0.8


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqliteFtsRetriever:
    """bm25 over one SQLite table; also an ``IndexableRetriever`` for ``kairox kb index``."""

    kind = "sqlite_fts"

    capabilities = RetrieverCapabilities(index_files=True)

    def __init__(self, name: str, options: SqliteFtsOptions, *, timeout: float = 10.0) -> None:
        self.name = name
        self.options = options
        self.busy_timeout = max(0.05, timeout * BUSY_SHARE)  # seconds
        self._conn: Any = None
        self._lock = threading.Lock()
        self._closing = False  # close() came while a query held the lock

    @classmethod
    def from_config(
        cls, kb: KnowledgeBaseConfig, options: SqliteFtsOptions | None = None
    ) -> SqliteFtsRetriever:
        """Build from a ``KnowledgeBaseConfig``; ``options`` as validated by the core."""
        if options is None:
            from kairox_core.plugin_options import knowledge_base_key, validate_options

            options = validate_options(SqliteFtsOptions, kb.options, key=knowledge_base_key(kb))
        return cls(kb.id, options, timeout=kb.timeout)

    @property
    def database(self) -> Path:
        return Path(self.options.path).expanduser()

    # --- schema ----------------------------------------------------------------------

    def _table_sql(self, conn: Any, name: str) -> str | None:
        row = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ? AND type = 'table'", (name,)
        ).fetchone()
        return str(row[0] or "") if row else None

    def _columns(self, conn: Any, table: str) -> set[str]:
        return {r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")}

    def _plan(self, conn: Any) -> tuple[str, str]:
        """(fts table, join clause); errors name the knowledge base and the fix."""
        o = self.options
        sql = self._table_sql(conn, o.table)
        if sql is None:
            raise RetrieverConfigError(
                self.name,
                f"table '{o.table}' not found in {self.database}; check "
                f"knowledge_bases.{self.name}.table, or build it with "
                f"`kairox kb index {self.name} PATH...`",
            )
        wanted = [
            *o.text_columns,
            o.id_column if o.id_column != "rowid" else None,
            o.title_column,
            *o.metadata_columns,
        ]
        have = self._columns(conn, o.table)
        missing = [c for c in wanted if c and c not in have]
        if missing:
            raise RetrieverConfigError(
                self.name,
                f"table '{o.table}' in {self.database} has no column(s) "
                f"{', '.join(missing)}; columns: {', '.join(sorted(have))}",
            )
        if "using fts5" in sql.lower():
            return o.table, ""
        fts = f"{o.table}_fts"
        if self._table_sql(conn, fts) is None:
            raise RetrieverConfigError(
                self.name,
                f"table '{o.table}' has no full-text index '{fts}' in "
                f"{self.database}; run `kairox kb index {self.name}` to build it",
            )
        return fts, f" JOIN {_q(o.table)} t ON t.rowid = {_q(fts)}.rowid"

    def _connect(self) -> Any:
        if self._conn is None:
            if not self.database.is_file():
                raise RetrieverConfigError(
                    self.name,
                    f"database file {self.database} not found; check "
                    f"knowledge_bases.{self.name}.path",
                )
            try:
                self._conn = connect(
                    self.database,
                    vec=False,
                    readonly=True,
                    busy_timeout=self.busy_timeout,
                    translate=False,  # a knowledge base's failure is the retriever's
                )
            except OperationalError as exc:
                raise RetrieverConfigError(
                    self.name, f"cannot open {self.database}: {self._why(exc)}"
                ) from None
        return self._conn

    # --- searching -------------------------------------------------------------------

    def search(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        o = self.options
        if k <= 0:
            return []
        columns = [*o.text_columns, *([o.title_column] if o.title_column else [])]
        expr = fts_match_expression(query, columns=columns)
        if expr is None:
            return []
        with self._lock:
            try:
                rows = self._select(expr, k, filters)
            finally:
                if self._closing:  # close() was called while this query ran
                    self._close_locked()
        hits = []
        n_text = len(o.text_columns)
        for row in rows:
            text = "\n".join(str(v) for v in row[1 : 1 + n_text] if v)
            metadata: dict[str, Any] = {"title": row[1 + n_text]} if o.title_column else {}
            metadata.update(zip(o.metadata_columns, row[2 + n_text : -1], strict=True))
            hits.append(
                RetrievalHit(
                    text=text,
                    score=-float(row[-1]),
                    source=self.name,
                    doc_id=str(row[0]),
                    metadata=metadata,
                )
            )
        return hits

    def _select(self, expr: str, k: int, filters: Mapping[str, Any] | None) -> list[Any]:
        """The matching rows, best first (called holding ``_lock``)."""
        o = self.options
        conn = self._connect()
        try:
            fts, join = self._plan(conn)
        except OperationalError as exc:
            raise RetrieverError(
                self.name, f"cannot read {self.database}: {self._why(exc)}"
            ) from None
        src = "t" if join else _q(fts)
        where, args = self._filters(src, filters or {})
        select = [
            f"{src}.{_q(o.id_column)}",
            *(f"{src}.{_q(c)}" for c in o.text_columns),
            f"{src}.{_q(o.title_column)}" if o.title_column else "NULL",
            *(f"{src}.{_q(c)}" for c in o.metadata_columns),
        ]
        sql = (
            f"SELECT {', '.join(select)}, bm25({_q(fts)}) AS s FROM {_q(fts)}{join} "
            f"WHERE {_q(fts)} MATCH ?{where} ORDER BY s LIMIT ?"
        )
        try:
            return list(conn.execute(sql, (expr, *args, k)).fetchall())
        except OperationalError as exc:
            raise RetrieverError(
                self.name, f"query failed on {self.database}: {self._why(exc)}"
            ) from None

    def _why(self, exc: Exception) -> str:
        if "locked" in str(exc) or "busy" in str(exc):
            return f"{exc} (another process holds a write lock; waited {self.busy_timeout:g}s)"
        return str(exc)

    def _filters(self, src: str, filters: Mapping[str, Any]) -> tuple[str, list[object]]:
        where, args = "", []
        for key, value in filters.items():
            if key not in self.options.metadata_columns:
                raise RetrieverError(
                    self.name,
                    f"cannot filter on '{key}': filterable columns are "
                    f"{', '.join(self.options.metadata_columns) or 'none'} "
                    f"(knowledge_bases.{self.name}.metadata_columns)",
                )
            values = list(value) if isinstance(value, list | tuple | set) else [value]
            where += f" AND {src}.{_q(key)} IN ({','.join('?' * len(values))})"
            args += values
        return where, args

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return await run_blocking(self.search, query, k, filters, name=f"kairox-kb-{self.name}")

    async def close(self) -> None:
        """Close the connection; a query still running (abandoned by a timeout) keeps
        it until it ends, so closing never waits for a locked database."""
        if not self._lock.acquire(blocking=False):
            self._closing = True
            return
        try:
            self._close_locked()
        finally:
            self._lock.release()

    def _close_locked(self) -> None:
        self._closing = False
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- building --------------------------------------------------------------------

    def index(self, paths: Sequence[str], *, progress: IndexProgress | None = None) -> IndexReport:
        """Add/refresh one row per file under ``paths`` and (re)build ``<table>_fts``."""
        o = self.options
        started = time.perf_counter()
        report = IndexReport()
        title = o.title_column or "title"
        text = o.text_columns[0]
        conn = connect(self.database, vec=False)
        try:
            # One transaction: the rows and their FTS index commit together, so a crash
            # (kill -9) mid-index leaves the previous pair, never rows the index lacks.
            with transaction(conn):
                if paths:
                    if self._table_sql(conn, o.table) is None:
                        extra = "".join(
                            f", {_q(c)} TEXT"
                            for c in o.metadata_columns
                            if c not in {"path", title, text, o.id_column}
                        )
                        conn.execute(
                            f"CREATE TABLE {_q(o.table)} ({_q(o.id_column)} TEXT PRIMARY KEY, "
                            f"{_q(title)} TEXT, {_q(text)} TEXT, path TEXT, mtime REAL, "
                            f"size INTEGER{extra})"
                        )
                    need = {o.id_column, title, text, "path", "mtime", "size"}
                    if not need <= self._columns(conn, o.table):
                        raise RetrieverConfigError(
                            self.name,
                            f"table '{o.table}' in {self.database} was not built by "
                            f"`kairox kb index` (needs columns {', '.join(sorted(need))})",
                        )
                    self._ingest(conn, paths, report, progress, title, text)
                self._build_fts(conn)
        finally:
            conn.close()
        report.seconds = time.perf_counter() - started
        return report

    def _ingest(
        self,
        conn: Any,
        paths: Sequence[str],
        report: IndexReport,
        progress: IndexProgress | None,
        title: str,
        text: str,
    ) -> None:
        o = self.options
        scan = scan_files(paths, max_bytes=o.max_file_bytes)
        report.skipped_binary = len(scan.skipped_binary)
        report.skipped_large = len(scan.skipped_large)
        report.errors.extend(scan.errors)
        report.skipped_outside.extend(scan.skipped_outside)
        known = {
            r[0]: (r[1], r[2])
            for r in conn.execute(f"SELECT {_q(o.id_column)}, mtime, size FROM {_q(o.table)}")
        }
        seen: set[str] = set()
        batch: list[tuple[Any, ...]] = []
        for i, path in enumerate(scan.files, start=1):
            key = str(path)
            seen.add(key)
            if progress:
                progress(i, len(scan.files), key)
            try:
                st = path.stat()
                if known.get(key) == (st.st_mtime, st.st_size):
                    report.unchanged += 1
                    continue
                body = path.read_bytes().decode("utf-8", errors="replace")
            except OSError as exc:
                report.errors.append(f"{path}: {exc.strerror or exc}")
                continue
            if key in known:
                report.updated += 1
            else:
                report.added += 1
            batch.append((key, path.name, body, key, st.st_mtime, st.st_size))
        gone = [
            key
            for key in known
            if key not in seen and any(Path(key) == r or r in Path(key).parents for r in scan.roots)
        ]
        conn.executemany(
            f"INSERT INTO {_q(o.table)} ({_q(o.id_column)}, {_q(title)}, {_q(text)}, path, "
            f"mtime, size) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT({_q(o.id_column)}) DO "
            f"UPDATE SET {_q(title)} = excluded.{_q(title)}, {_q(text)} = "
            f"excluded.{_q(text)}, mtime = excluded.mtime, size = excluded.size",
            batch,
        )
        conn.executemany(
            f"DELETE FROM {_q(o.table)} WHERE {_q(o.id_column)} = ?", [(key,) for key in gone]
        )
        report.removed = len(gone)
        report.chunks = len(batch)

    def _build_fts(self, conn: Any) -> None:
        """(Re)build the external-content FTS5 index of an ordinary table (inside
        ``index``'s transaction, so it commits with the rows)."""
        o = self.options
        sql = self._table_sql(conn, o.table)
        if sql is None:
            raise RetrieverConfigError(
                self.name,
                f"table '{o.table}' not found in {self.database}; give paths to "
                f"index: `kairox kb index {self.name} PATH...`",
            )
        if "using fts5" in sql.lower():
            return  # an FTS5 table indexes itself
        fts = f"{o.table}_fts"
        cols = [*o.text_columns, *([o.title_column] if o.title_column else [])]
        conn.execute(f"DROP TABLE IF EXISTS {_q(fts)}")
        conn.execute(
            f"CREATE VIRTUAL TABLE {_q(fts)} USING fts5({', '.join(_q(c) for c in cols)}, "
            f"content={_q(o.table)}, tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute(f"INSERT INTO {_q(fts)}({_q(fts)}) VALUES ('rebuild')")
