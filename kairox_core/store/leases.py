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
The statements live once in store/sql/leases.py, for SQLite and any SQL backend.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from kairox_core.store.base import Claim, Lease


def _host() -> str:
    """Where a pid means something: the host name, and on Linux the pid namespace (two
    containers may share a host name and a database volume, not their pids)."""
    name = socket.gethostname()
    try:
        return f"{name}:pidns-{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return name


HOST = _host()


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


class Heartbeat:
    """Renews a lease every ``ttl / 3`` seconds (or ``interval``) from a daemon thread
    while a run is alive (a thread, so a strategy that blocks the event loop does not
    let it lapse); when the process dies the renewals stop and the lease expires within
    ``ttl``. ``wait_renewals`` lets a test that drives the lease store's clock by hand
    wait for a beat instead of sleeping."""

    def __init__(
        self, leases: Any, name: str, holder: str, ttl: float, *, interval: float | None = None
    ) -> None:
        self.leases, self.name, self.holder, self.ttl = leases, name, holder, ttl
        self.interval = ttl / 3 if interval is None else interval
        self.renewals = 0
        self._renewed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {name}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def wait_renewals(self, count: int, timeout: float = 60.0) -> bool:
        """Whether ``count`` renewals have succeeded within ``timeout`` seconds."""
        with self._renewed:
            return self._renewed.wait_for(lambda: self.renewals >= count, timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self.leases.renew(self.name, self.holder, ttl=self.ttl):
                    return
            except Exception:  # a closed or locked database: the next beat tries again
                continue
            with self._renewed:
                self.renewals += 1
                self._renewed.notify_all()


__all__ = ["HOST", "Claim", "Heartbeat", "Lease", "is_dead", "pid_alive"]
