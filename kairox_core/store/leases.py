"""Leases: an atomic claim in the database that one process at a time does something.

A lease is one row per name (``compaction:<session id>``): the holder's id, its pid
and host, a note (what it is doing) and an expiry. ``acquire`` takes it with one
conditional upsert inside a write transaction, so of two processes racing exactly one
wins. A holder is dead, and its lease free, once the lease has expired (holders renew
a short lease while they work: ``Heartbeat``) or, on the same host, as soon as its pid
is gone, so a kill -9 frees the lease at once instead of after a timeout ("host" is
the host name plus, on Linux, the pid namespace). ``acquire`` returns the dead holder
it displaced so the caller can close what it left open; a holder checks it still holds
the lease (``renew``) in the transaction that commits its work, so one that stalled
past its expiry and was displaced cannot commit too.
A PostgreSQL backend implements the same ``LeaseStore`` protocol (store/protocol.py).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from kairox_core.store.database import Database, DatabaseStore

COMPONENT = "leases"
MIGRATIONS = (
    """
    CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        acquired_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
)


def _host() -> str:
    """Where a pid means something: the host name, and on Linux the pid namespace (two
    containers may share a host name and a database volume, not their pids)."""
    name = socket.gethostname()
    try:
        return f"{name}:pidns-{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return name


HOST = _host()


@dataclass(frozen=True)
class Lease:
    """One claim: who holds ``name``, from where, until when."""

    name: str
    holder: str
    pid: int
    host: str
    note: str
    acquired_at: float
    expires_at: float

    def describe(self) -> str:
        """For messages: ``holder c-1 (pid 42 on host h)``."""
        return f"holder {self.holder} (pid {self.pid} on host {self.host})"


@dataclass(frozen=True)
class Claim:
    """What ``acquire`` found: ``lease`` when taken (else None), ``current`` the live
    lease that refused it, ``displaced`` a dead holder's lease it replaced."""

    lease: Lease | None
    current: Lease | None = None
    displaced: Lease | None = None

    @property
    def ok(self) -> bool:
        return self.lease is not None


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process on this host (a zombie, killed but not yet
    reaped by its parent, counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True  # no /proc (macOS): os.kill said it exists


def is_dead(lease: Lease, now: float | None = None) -> bool:
    """Expired, or held by a pid of this host that no longer runs."""
    now = time.time() if now is None else now
    if lease.expires_at <= now:
        return True
    return lease.host == HOST and not pid_alive(lease.pid)


class SqliteLeaseStore(DatabaseStore):
    """Leases in the shared SQLite database (the ``leases`` table)."""

    def __init__(self, path_or_conn: str | os.PathLike[str] | Database | Any) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)

    def acquire(self, name: str, holder: str, *, ttl: float, note: str = "") -> Claim:
        """Take ``name`` for ``holder`` for ``ttl`` seconds unless a live holder has it
        (a holder re-acquiring its own lease renews it)."""
        now = time.time()
        with self.db.atomic() as conn:  # BEGIN IMMEDIATE: the check and the write as one
            current = self._get(conn, name)
            dead = current is not None and current.holder != holder and is_dead(current, now)
            row = conn.execute(
                "INSERT INTO leases(name, holder, pid, host, note, acquired_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                "holder = excluded.holder, pid = excluded.pid, host = excluded.host, "
                "note = excluded.note, acquired_at = excluded.acquired_at, "
                "expires_at = excluded.expires_at "
                "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                "OR leases.holder = ? RETURNING holder",
                (
                    name,
                    holder,
                    os.getpid(),
                    HOST,
                    note,
                    now,
                    now + ttl,
                    now,
                    current.holder if dead and current is not None else "",
                ),
            ).fetchone()
            if row is None:
                return Claim(None, current=current)
            lease = self._get(conn, name)
        return Claim(lease, displaced=current if dead else None)

    def renew(self, name: str, holder: str, *, ttl: float) -> bool:
        """Push ``holder``'s expiry ``ttl`` seconds out; False if it no longer holds it."""
        with self.db.atomic() as conn:
            cur = conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
                (time.time() + ttl, name, holder),
            )
            return bool(cur.rowcount)

    def release(self, name: str, holder: str) -> bool:
        """Give ``name`` up (only its holder can); False if ``holder`` did not hold it."""
        with self.db.atomic() as conn:
            cur = conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))
            return bool(cur.rowcount)

    def get(self, name: str) -> Lease | None:
        """The lease row of ``name`` (live or dead: see ``is_dead``), or None."""
        with self.db.lock:
            return self._get(self.db.conn, name)

    @staticmethod
    def _get(conn: Any, name: str) -> Lease | None:
        row = conn.execute(
            "SELECT name, holder, pid, host, note, acquired_at, expires_at FROM leases "
            "WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            return None
        return Lease(row[0], row[1], int(row[2]), row[3], row[4], float(row[5]), float(row[6]))


class Heartbeat:
    """Renews a lease every ``ttl / 3`` seconds from a daemon thread while a run is
    alive (a thread, so a strategy that blocks the event loop does not let it lapse);
    when the process dies the renewals stop and the lease expires within ``ttl``."""

    def __init__(self, leases: Any, name: str, holder: str, ttl: float) -> None:
        self.leases, self.name, self.holder, self.ttl = leases, name, holder, ttl
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {name}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not self.leases.renew(self.name, self.holder, ttl=self.ttl):
                    return
            except Exception:  # a closed or locked database: the next beat tries again
                continue


__all__ = ["Claim", "Heartbeat", "Lease", "SqliteLeaseStore", "is_dead", "pid_alive"]
