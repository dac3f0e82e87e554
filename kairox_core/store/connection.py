"""The one SQLite connection factory every store uses.

CPython builds without ``enable_load_extension`` (pyenv, many macOS Pythons) cannot
load sqlite-vec, so we use ``sqlean.py``, a drop-in ``sqlite3`` that can, on Linux,
macOS and Windows. WAL lets readers and one writer share the file across processes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import sqlean as sqlite3

Connection = sqlite3.Connection
Row = sqlite3.Row
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError
OperationalError = sqlite3.OperationalError

BUSY_TIMEOUT_MS = 30_000
_vec_lock = threading.Lock()


def connect(
    path: str | os.PathLike[str],
    *,
    vec: bool = True,
    readonly: bool = False,
    busy_timeout: float | None = None,
) -> Any:
    """Open ``path`` with WAL, foreign keys, a busy timeout and (by default) sqlite-vec.

    ``":memory:"`` opens a private in-memory database. Parent folders are created.
    Connections use autocommit mode (``isolation_level=None``): callers group writes
    with explicit ``BEGIN IMMEDIATE`` ... ``COMMIT`` (see ``transaction``).
    ``busy_timeout`` (seconds) replaces the 30 s wait for another process's lock, for
    a reader that must give up sooner (a knowledge-base query under its timeout).
    """
    busy_ms = BUSY_TIMEOUT_MS if busy_timeout is None else max(1, int(busy_timeout * 1000))
    target = str(path)
    if target != ":memory:" and not readonly:
        Path(target).expanduser().parent.mkdir(parents=True, exist_ok=True)
    if readonly:
        uri = f"file:{Path(target).expanduser()}?mode=ro"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=busy_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
    else:
        conn = sqlite3.connect(
            os.path.expanduser(target),
            timeout=busy_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
    if target != ":memory:" and not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: no corruption on crash
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    if vec:
        load_vec(conn)
    return conn


def load_vec(conn: Any) -> None:
    """Load the sqlite-vec extension into ``conn``."""
    import sqlite_vec

    with _vec_lock:
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)


class transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on error: all or nothing."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __enter__(self) -> Any:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
