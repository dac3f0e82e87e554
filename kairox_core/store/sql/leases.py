"""Leases (store/leases.py) once for every SQL backend: one row per name.

``acquire`` locks the name's row (``FOR UPDATE`` where rows lock; SQLite's write
transaction already holds the whole file) and decides in the same transaction; a missing
row cannot be locked, so it is inserted with ``ON CONFLICT DO NOTHING``: of N processes
racing for a new lease exactly one inserts, the others then find its row and are
refused (an upsert there would let each overwrite the last). Time comes from ``clock``
(``time.time`` unless a test injects its own), so expiry is decided by one clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from kairox_core.store.leases import HOST, Claim, Lease, is_dead
from kairox_core.store.sql.dialect import DB, SqlStore

_COLUMNS = "name, holder, pid, host, note, acquired_at, expires_at"


class SqlLeaseStore(SqlStore[DB]):
    """The ``LeaseStore`` protocol over a ``SqlDatabase`` (the ``leases`` table)."""

    def __init__(self, db: DB, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(db)
        self.clock = clock

    @property
    def _table(self) -> str:
        return self.db.dialect.table("leases")

    def acquire(self, name: str, holder: str, *, ttl: float, note: str = "") -> Claim:
        """Take ``name`` for ``holder`` for ``ttl`` seconds unless a live holder has it
        (a holder re-acquiring its own lease renews it); a dead holder's lease is taken
        and returned as ``displaced`` so the caller can close what it left open."""
        now = self.clock()
        values = (holder, os.getpid(), HOST, note, now, now + ttl)
        insert = self.db.dialect.insert_ignore(self._table, _COLUMNS, "name")
        with self.db.atomic() as conn:
            while (current := self._get(conn, name, lock=True)) is None:
                if conn.execute(insert, (name, *values)).fetchone() is not None:
                    return Claim(self._get(conn, name))
                # another process's insert won (read committed: the next read sees it;
                # released again meanwhile, it is inserted again)
            if current.holder != holder and not is_dead(current, now):
                return Claim(None, current=current)
            conn.execute(
                self._sql(
                    f"UPDATE {self._table} SET holder = ?, pid = ?, host = ?, note = ?, "
                    "acquired_at = ?, expires_at = ? WHERE name = ?"
                ),
                (*values, name),
            )
            lease = self._get(conn, name)
        return Claim(lease, displaced=current if current.holder != holder else None)

    def renew(self, name: str, holder: str, *, ttl: float) -> bool:
        """Push ``holder``'s expiry ``ttl`` seconds out; False if it no longer holds
        ``name``. Joins the caller's open ``atomic()`` (a run renews where it commits)."""
        with self.db.atomic() as conn:
            row = conn.execute(
                self._sql(
                    f"UPDATE {self._table} SET expires_at = ? WHERE name = ? AND holder = ? "
                    "RETURNING 1"
                ),
                (self.clock() + ttl, name, holder),
            ).fetchone()
        return row is not None

    def release(self, name: str, holder: str) -> bool:
        """Give ``name`` up (only its holder can); False if ``holder`` did not hold it."""
        with self.db.atomic() as conn:
            row = conn.execute(
                self._sql(f"DELETE FROM {self._table} WHERE name = ? AND holder = ? RETURNING 1"),
                (name, holder),
            ).fetchone()
        return row is not None

    def get(self, name: str) -> Lease | None:
        """The lease row of ``name`` (live or dead: see ``is_dead``), or None."""
        with self.db.reading() as conn:
            return self._get(conn, name)

    def _get(self, conn: Any, name: str, *, lock: bool = False) -> Lease | None:
        sql = f"SELECT {_COLUMNS} FROM {self._table} WHERE name = ?"
        if lock:
            sql += self.db.dialect.for_update
        row = conn.execute(self._sql(sql), (name,)).fetchone()
        if row is None:
            return None
        return Lease(
            row["name"],
            row["holder"],
            int(row["pid"]),
            row["host"],
            row["note"],
            float(row["acquired_at"]),
            float(row["expires_at"]),
        )


__all__ = ["SqlLeaseStore"]
