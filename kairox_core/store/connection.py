"""The one SQLite connection factory every store uses.

CPython builds without ``enable_load_extension`` (pyenv, many macOS Pythons) cannot
load sqlite-vec, so we use ``sqlean.py``, a drop-in ``sqlite3`` that can, on Linux,
macOS and Windows. WAL lets readers and one writer share the file across processes.

SQLite's failures that are the file's, not the code's (corrupt, truncated, not a
database, read-only, disk full, locked, I/O) become ``StorageError``s naming the file and
what to do, here, once: on open, and on every statement of a connection opened here
(``storage_error`` translates; ``Database`` translates what a read's rows raise).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import sqlean as sqlite3

from kairox_core.errors import (
    StorageDamagedError,
    StorageError,
    StorageFullError,
    StorageReadOnlyError,
    StorageUnavailableError,
)

Connection = sqlite3.Connection
Row = sqlite3.Row
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError
OperationalError = sqlite3.OperationalError

BUSY_TIMEOUT_MS = 30_000
_vec_lock = threading.Lock()

# SQLite's primary result codes (the low byte of an extended code) that are the file's
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
_PERM, _AUTH = 3, 23
_CHECK = "run `kairox db check {path}` to see what is damaged, and restore the file from a backup"


def storage_error(exc: BaseException, path: str) -> StorageError | None:
    """The ``StorageError`` SQLite's ``exc`` on the database ``path`` means, or None when
    it is not about the file (a constraint, a bug in a statement): those stay as they are."""
    if isinstance(exc, StorageError):
        return exc
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.IntegrityError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (None, 1):  # SQLITE_ERROR: an extension (sqlite-vec) passing one on
        primary = _code_from_message(str(exc)) or primary
    where = "an in-memory database" if path == ":memory:" else f"the database {path}"
    reason = str(exc)
    if primary in (_CORRUPT, _NOTADB):
        return StorageDamagedError(
            f"{where} is damaged ({reason}); nothing was read or written. "
            f"Fix: {_CHECK.format(path=path)} (or move it aside to start a new one)"
        )
    if primary == _IOERR and _disk_full(path):
        primary = _FULL  # a write (the -shm file, a page) that found no space left
    if primary == _FULL:
        return StorageFullError(
            f"{where} could not be written: the disk is full ({reason}); nothing of this "
            "action was recorded. Fix: free space on the disk that holds it, then retry"
        )
    if primary in (_READONLY, _PERM, _AUTH):
        return StorageReadOnlyError(
            f"{where} cannot be written ({reason}); nothing was recorded. Fix: make the file, "
            "its folder (SQLite writes a -wal and a -shm file beside it) and its mount "
            "writable, or point --db / [kairox] database at a writable place"
        )
    if primary == _CANTOPEN:
        return StorageReadOnlyError(
            f"cannot open {where} ({reason}). Fix: check that its folder exists and is "
            "writable (SQLite writes a -wal and a -shm file beside it), or point --db / "
            "[kairox] database elsewhere"
        )
    if primary in (_BUSY, _LOCKED):
        return StorageUnavailableError(
            f"{where} is locked by another process ({reason}); nothing was recorded. "
            "Fix: retry when the other Kairox process (or tool holding the file) is done"
        )
    if primary == _IOERR:
        return StorageDamagedError(
            f"reading or writing {where} failed ({reason}); nothing was recorded. Fix: check "
            f"the disk (full? removed?), then {_CHECK.format(path=path)}"
        )
    return None


def _disk_full(path: str) -> bool:
    """Whether the file system holding ``path`` has no space left for a page."""
    if path == ":memory:":
        return False
    try:
        info = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < 64 * 1024


def _code_from_message(message: str) -> int | None:
    """A result code from the message, for a driver without ``sqlite_errorcode``."""
    known = {
        "database disk image is malformed": _CORRUPT,
        "file is not a database": _NOTADB,
        "database or disk is full": _FULL,
        "attempt to write a readonly database": _READONLY,
        "unable to open database file": _CANTOPEN,
        "database is locked": _BUSY,
        "disk I/O error": _IOERR,
    }
    for text, code in known.items():
        if text in message:
            return code
    return None


class KairoxConnection(sqlite3.Connection):  # type: ignore[misc]
    """A connection whose statements raise ``StorageError`` for the file's failures."""

    kx_path = ":memory:"

    def execute(self, *args: Any) -> Any:
        try:
            return super().execute(*args)
        except sqlite3.DatabaseError as exc:
            raise _translated(exc, self.kx_path) from exc

    def executemany(self, *args: Any) -> Any:
        try:
            return super().executemany(*args)
        except sqlite3.DatabaseError as exc:
            raise _translated(exc, self.kx_path) from exc

    def executescript(self, *args: Any) -> Any:
        try:
            return super().executescript(*args)
        except sqlite3.DatabaseError as exc:
            raise _translated(exc, self.kx_path) from exc


def _translated(exc: BaseException, path: str) -> BaseException:
    error = storage_error(exc, path)
    return exc if error is None else error


def connect(
    path: str | os.PathLike[str],
    *,
    vec: bool = True,
    readonly: bool = False,
    busy_timeout: float | None = None,
    translate: bool = True,
) -> Any:
    """Open ``path`` with WAL, foreign keys, a busy timeout and (by default) sqlite-vec.

    ``":memory:"`` opens a private in-memory database. Parent folders are created.
    Connections use autocommit mode (``isolation_level=None``): callers group writes
    with explicit ``BEGIN IMMEDIATE`` ... ``COMMIT`` (see ``transaction``).
    ``busy_timeout`` (seconds) replaces the 30 s wait for another process's lock, for
    a reader that must give up sooner (a knowledge-base query under its timeout).
    ``translate=False``: SQLite's own errors (a caller that reports a database that is
    not Kairox's in its own words).
    """
    target = str(path)
    try:
        return _connect(
            target, vec=vec, readonly=readonly, busy_timeout=busy_timeout, translate=translate
        )
    except sqlite3.DatabaseError as exc:
        if not translate:
            raise
        raise _translated(exc, os.path.expanduser(target)) from exc
    except OSError as exc:  # the parent folder could not be created
        if not translate:
            raise
        raise StorageReadOnlyError(
            f"cannot create the folder of the database {target} ({exc.strerror or exc}). "
            "Fix: create it, or point --db / [kairox] database at a writable place"
        ) from exc


def _connect(
    target: str, *, vec: bool, readonly: bool, busy_timeout: float | None, translate: bool
) -> Any:
    busy_ms = BUSY_TIMEOUT_MS if busy_timeout is None else max(1, int(busy_timeout * 1000))
    factory = KairoxConnection if translate else sqlite3.Connection
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
            factory=factory,
        )
    else:
        conn = sqlite3.connect(
            os.path.expanduser(target),
            timeout=busy_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            factory=factory,
        )
    if translate:
        conn.kx_path = os.path.expanduser(target)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
        if target != ":memory:" and not readonly:
            conn.execute("PRAGMA journal_mode = WAL")  # the first read of the file
        conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: no corruption on crash
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA temp_store = MEMORY")
        if vec:
            load_vec(conn)
    except BaseException:
        conn.close()
        raise
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
            rollback(self.conn)


def rollback(conn: Any) -> None:
    """Undo the open transaction, if SQLite has not already (it rolls back by itself on
    some errors: a full disk); a failing rollback never hides the error that caused it."""
    if conn.in_transaction:  # a failed ROLLBACK: the caller raises the original error
        with contextlib.suppress(sqlite3.DatabaseError, StorageError):
            conn.execute("ROLLBACK")
