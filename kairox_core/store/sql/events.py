"""The event log's reads (and recall's progress record) once for every SQL backend.

Appending, and the history window, stay each backend's own: SQLite numbers a batch
under its write lock and keeps history as a projection table a trigger fills;
PostgreSQL appends a session's batch in one statement under the session row's lock and
reads history from the JSON. Everything else (reads by range and type, the planning
queries, the session list) is the same SQL over the dialect's JSON operators. What is
not SQL (validation, decoding rows, the compaction-run rule) is ``store/event_rows.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from kairox_core.events import Event
from kairox_core.store.event_rows import (
    COMPACTION_EVENT_TYPES,
    COMPACTION_RUN_TYPES,
    CONVERSATION_TYPES,
    Row,
    SessionInfo,
    compaction_running_seq,
    event_from_row,
    indexed_stretch,
    planning_row,
    session_info,
    skip_leading,
    wanted_types,
)
from kairox_core.store.sql.dialect import DB, SqlStore

if TYPE_CHECKING:
    from kairox_core.store.base import HistoryRow

_CONVERSATION = f"type IN ({', '.join('?' * len(CONVERSATION_TYPES))})"
_COMPACTION = f"type IN ({', '.join('?' * len(COMPACTION_EVENT_TYPES))})"
_RUNS = f"type IN ({', '.join('?' * len(COMPACTION_RUN_TYPES))})"


def _emit(events: Sequence[Event]) -> Callable[[], None]:
    def run() -> None:
        from kairox_core.plugins import get_plugins

        host = get_plugins()
        for event in events:
            host.emit(event)

    return run


class SqlEventLog(SqlStore[DB], ABC):
    """The ``EventLog`` protocol but for ``append_many`` and ``history_rows``, which a
    backend writes in its own SQL (``EventStore`` on SQLite)."""

    def atomic(self) -> AbstractContextManager[Any]:
        """A transaction on this log's database (nests; the other stores on it join)."""
        return self.db.atomic()

    def append(self, event: Event) -> Event:
        """Store one event; returns it with ``seq`` assigned."""
        return self.append_many([event])[0]

    @abstractmethod
    def append_many(self, events: Iterable[Event]) -> list[Event]:
        """Store events atomically (all or none), each with the next seq of its session;
        call ``emit_after_commit`` with what was stored."""

    def emit_after_commit(self, stored: Sequence[Event]) -> None:
        """Hand ``stored`` to the plugins' event observers once the outermost
        transaction has committed (never for one rolled back)."""
        self.db.after_commit(_emit(tuple(stored)))

    def read(
        self,
        session_id: str,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Event]:
        """The session's events in seq order, optionally a seq range (inclusive) and types."""
        sql = "SELECT data FROM events WHERE session_id = ?"
        params: list[object] = [session_id]
        if first_seq is not None:
            sql += " AND seq >= ?"
            params.append(first_seq)
        if last_seq is not None:
            sql += " AND seq <= ?"
            params.append(last_seq)
        if types is not None:
            wanted = wanted_types(types)
            if not wanted:
                return []
            sql += f" AND type IN ({','.join('?' * len(wanted))})"
            params.extend(wanted)
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql + " ORDER BY seq"), params).fetchall()
        return [event_from_row(row["data"]) for row in rows]

    def last_seq(self, session_id: str) -> int:
        """The highest seq stored for the session; 0 when it has no events."""
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql("SELECT COALESCE(MAX(seq), 0) AS last FROM events WHERE session_id = ?"),
                (session_id,),
            ).fetchone()
        return int(row["last"])

    def compaction_events(self, session_id: str, after_seq: int = 0) -> list[Event]:
        """Compaction-state events of a session above ``after_seq``, in seq order.

        No ``ORDER BY`` in SQL on purpose: that would steer SQLite to the (session, seq)
        index and scan the whole session; without it the (session, type, seq) index finds
        the few compaction events directly."""
        sql = f"SELECT data FROM events WHERE session_id = ? AND {_COMPACTION} AND seq > ?"
        with self.db.reading() as conn:
            rows = conn.execute(
                self._sql(sql), (session_id, *COMPACTION_EVENT_TYPES, after_seq)
            ).fetchall()
        events = [event_from_row(row["data"]) for row in rows]
        return sorted(events, key=lambda e: e.seq or 0)

    def conversation_rows(
        self,
        session_id: str,
        skip: Sequence[tuple[int, int]] = (),
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
    ) -> list[Row]:
        """Conversation events outside ``skip`` (inclusive ranges), oldest first, light
        columns only. A skipped range at the start of the session is not scanned."""
        skip = sorted(skip)
        dialect = self.db.dialect
        with self.db.reading() as conn:
            if skip and first_seq is None:
                first = conn.execute(
                    self._sql(
                        "SELECT min(seq) AS low FROM events "
                        f"WHERE session_id = ? AND {_CONVERSATION}"
                    ),
                    (session_id, *CONVERSATION_TYPES),
                ).fetchone()
                first_seq, skip = skip_leading(skip, first_seq, first["low"])
            sql = (
                f"SELECT seq, type, {dialect.json_text('data', 'payload', 'turn_id')} AS turn_id, "
                f"{dialect.json_text('data', 'payload', 'tokens')} AS tokens "
                f"FROM events WHERE session_id = ? AND {_CONVERSATION}"
            )
            params: list[object] = [session_id, *CONVERSATION_TYPES]
            if first_seq is not None:
                sql += " AND seq >= ?"
                params.append(first_seq)
            if last_seq is not None:
                sql += " AND seq <= ?"
                params.append(last_seq)
            for a, b in skip:
                sql += " AND NOT (seq BETWEEN ? AND ?)"
                params += [a, b]
            rows = conn.execute(self._sql(sql + " ORDER BY seq"), params).fetchall()
        return [planning_row(r["seq"], r["type"], r["turn_id"], r["tokens"]) for r in rows]

    @abstractmethod
    def history_rows(
        self,
        session_id: str,
        *,
        below: int | None = None,
        above: int | None = None,
        limit: int | None = None,
        counter_key: str | None = None,
    ) -> list[HistoryRow]:
        """What history renders (``event_rows.HISTORY_COLUMNS``: ``tokens`` is None
        unless counted under ``counter_key``). With ``above``: the rows above it, oldest
        first; otherwise newest first below ``below`` (None: from the newest), at most
        ``limit``."""

    def conversation_seqs(self, session_id: str, below: int | None, limit: int) -> list[int]:
        """Seqs of conversation events below ``below`` (None: all), newest first, at
        most ``limit``."""
        sql = f"SELECT seq FROM events WHERE session_id = ? AND {_CONVERSATION}"
        params: list[object] = [session_id, *CONVERSATION_TYPES]
        if below is not None:
            sql += " AND seq < ?"
            params.append(below)
        sql += " ORDER BY seq DESC LIMIT ?"
        params.append(limit)
        with self.db.reading() as conn:
            return [int(r["seq"]) for r in conn.execute(self._sql(sql), params).fetchall()]

    def compaction_running(self, session_id: str) -> int | None:
        """The seq of the latest ``ContextCompactionStarted`` with no end recorded, else
        None. Whether its process is alive is the compaction lease's to say (a run
        whose process died is closed by the next one: compaction/compactor.py)."""
        sql = (
            "SELECT type, max(seq) AS seq FROM events "
            f"WHERE session_id = ? AND {_RUNS} GROUP BY type"
        )
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql), (session_id, *COMPACTION_RUN_TYPES)).fetchall()
        return compaction_running_seq({r["type"]: int(r["seq"]) for r in rows})

    def indexed_stretch(self, session_id: str) -> tuple[int, int] | None:
        """The stretch of seqs recall has indexed, (low, last); None before the first."""
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql("SELECT low_seq, last_seq FROM recall_progress WHERE session_id = ?"),
                (session_id,),
            ).fetchone()
        return indexed_stretch(row["low_seq"], row["last_seq"]) if row is not None else None

    def set_indexed_stretch(self, session_id: str, low: int, last: int) -> None:
        """Widen the recorded stretch (never narrow it: two processes catching up at
        once each report what they indexed, the union is what is indexed)."""
        greatest, least = self.db.dialect.greatest, self.db.dialect.least
        with self.db.atomic() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO recall_progress (session_id, last_seq, low_seq) VALUES (?, ?, ?) "
                    "ON CONFLICT (session_id) DO UPDATE SET "
                    f"last_seq = {greatest}(recall_progress.last_seq, excluded.last_seq), "
                    f"low_seq = {least}(COALESCE(recall_progress.low_seq, excluded.low_seq), "
                    "excluded.low_seq)"
                ),
                (session_id, last, low),
            )

    def sessions(
        self, *, workspace_id: str | None = None, include_archived: bool = True
    ) -> list[SessionInfo]:
        """Every session (or one workspace's), oldest first."""
        sql = "SELECT * FROM sessions WHERE 1 = 1"
        params: list[object] = []
        if workspace_id is not None:
            sql += " AND workspace_id = ?"
            params.append(workspace_id)
        if not include_archived:
            sql += " AND archived_at IS NULL"
        sql += " ORDER BY created_at, session_id"
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql), params).fetchall()
        return [session_info(row) for row in rows]

    def get_session(self, session_id: str) -> SessionInfo | None:
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql("SELECT * FROM sessions WHERE session_id = ?"), (session_id,)
            ).fetchone()
        return session_info(row) if row is not None else None


__all__ = ["SqlEventLog"]
