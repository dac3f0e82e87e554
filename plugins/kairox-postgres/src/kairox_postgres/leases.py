"""``LeaseStore`` on PostgreSQL: the core's atomic claims (kairox_core/store/leases.py),
one row per name, shared by every host on the server.

``acquire`` locks the name's row (``SELECT ... FOR UPDATE``, or the insert's conflict
when there is none) and decides in one transaction, so of N processes on N hosts
exactly one wins; a dead holder (expired, or its pid gone on this host) is displaced
and returned so the caller can close what it left open.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kairox_core.store.leases import HOST, Claim, Lease, is_dead
from kairox_postgres.db import PgDatabase


class PgLeaseStore:
    """Leases in the ``kairox_leases`` table."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def acquire(self, name: str, holder: str, *, ttl: float, note: str = "") -> Claim:
        """Take ``name`` for ``holder`` for ``ttl`` seconds unless a live holder has it
        (a holder re-acquiring its own lease renews it).

        An existing row is locked (``FOR UPDATE``) and decided on; a missing one cannot
        be locked, so it is inserted with ``ON CONFLICT DO NOTHING``: of N hosts racing
        for a new lease exactly one inserts, the others then find its row and are
        refused (an upsert there would let each overwrite the last)."""
        now = time.time()
        values = (holder, os.getpid(), HOST, note, now, now + ttl)
        with self.db.atomic() as conn:
            while (current := self._get(conn, name, lock=True)) is None:
                inserted = conn.execute(
                    "INSERT INTO kairox_leases (name, holder, pid, host, note, acquired_at, "
                    "expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (name) DO NOTHING RETURNING name",
                    (name, *values),
                ).fetchone()
                if inserted is not None:
                    return Claim(self._get(conn, name))
                # another host's insert won (read committed: the next read sees it;
                # released again meanwhile, it is inserted again)
            if current.holder != holder and not is_dead(current, now):
                return Claim(None, current=current)
            conn.execute(
                "UPDATE kairox_leases SET holder = %s, pid = %s, host = %s, note = %s, "
                "acquired_at = %s, expires_at = %s WHERE name = %s",
                (*values, name),
            )
            lease = self._get(conn, name)
        displaced = current if current.holder != holder else None
        return Claim(lease, displaced=displaced)

    def renew(self, name: str, holder: str, *, ttl: float) -> bool:
        """Push ``holder``'s expiry out; False if it no longer holds ``name``. Joins the
        caller's open ``atomic()`` transaction (a run renews where it commits)."""
        rows = self.db.execute(
            "UPDATE kairox_leases SET expires_at = %s WHERE name = %s AND holder = %s RETURNING 1",
            (time.time() + ttl, name, holder),
        )
        return bool(rows)

    def release(self, name: str, holder: str) -> bool:
        rows = self.db.execute(
            "DELETE FROM kairox_leases WHERE name = %s AND holder = %s RETURNING 1",
            (name, holder),
        )
        return bool(rows)

    def get(self, name: str) -> Lease | None:
        with self.db.connection() as conn:
            return self._get(conn, name)

    @staticmethod
    def _get(conn: Any, name: str, *, lock: bool = False) -> Lease | None:
        sql = (
            "SELECT name, holder, pid, host, note, acquired_at, expires_at FROM kairox_leases "
            "WHERE name = %s" + (" FOR UPDATE" if lock else "")
        )
        row = conn.execute(sql, (name,)).fetchone()
        if row is None:
            return None
        if isinstance(row, dict):
            row = tuple(
                row[k]
                for k in ("name", "holder", "pid", "host", "note", "acquired_at", "expires_at")
            )
        return Lease(row[0], row[1], int(row[2]), row[3], row[4], float(row[5]), float(row[6]))
