"""One open Kairox database shared by its stores: a connection, a lock, nested atomic blocks.

The event store, the memory store and the approval flow live in one SQLite file. When
they share one ``Database`` an approval (memory write + proposal row + events) commits as
one transaction: ``atomic()`` opens ``BEGIN IMMEDIATE`` at the outermost level and a
``SAVEPOINT`` inside, and callbacks queued with ``after_commit`` (event observers) run
only once the outermost block has committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import count
from typing import Any, TypeVar

from kairox_core.store.connection import (
    Connection,
    KairoxConnection,
    connect,
    rollback,
    storage_error,
)
from kairox_core.store.migrations import migrate
from kairox_core.store.sql.dialect import SQLITE, Dialect

_registry: dict[int, Database] = {}
_registry_lock = threading.Lock()
_savepoints = count(1)
_on_close: list[Callable[[Any], None]] = []


def on_close(callback: Callable[[Any], None]) -> None:
    """Call ``callback(conn)`` just before a database closes the connection it owns: a
    cache kept per connection (retrieval/ann.py's graphs) is dropped then, not by
    whichever later call first notices the closed connection (a cold turn paid for
    freeing the last database's graph)."""
    if callback not in _on_close:
        _on_close.append(callback)


class Database:
    """A connection plus what every store on it must share (lock, transaction depth)."""

    def __init__(self, conn: Any, *, owned: bool = False, path: str | None = None) -> None:
        self.conn = conn
        self.path = path
        self.owned = owned
        self.lock = threading.RLock()
        self._depth = 0
        self._after: list[Callable[[], None]] = []
        self._users = 0
        self.closed = False
        self._reading = _Held(self)

    @classmethod
    def open(cls, target: str | os.PathLike[str] | Database | Any) -> Database:
        """A ``Database`` for a path (opened here), a ``Database`` (shared) or a connection."""
        if isinstance(target, Database):
            db = target
        elif isinstance(target, str | os.PathLike):
            db = cls(connect(target), owned=True, path=os.fspath(target))
            with _registry_lock:  # so a store handed the bare connection joins this one
                _registry[id(db.conn)] = db
        elif isinstance(target, Connection):
            with _registry_lock:
                known = _registry.get(id(target))
                if known is None or known.conn is not target:
                    path = target.kx_path if isinstance(target, KairoxConnection) else None
                    known = cls(target, owned=False, path=path)
                    _registry[id(target)] = known
                db = known
        else:
            raise TypeError(f"expected a path, a Database or a connection, got {type(target)!r}")
        db._users += 1
        return db

    dialect: Dialect = SQLITE  # the SQL stores' spelling here (store/sql/dialect.py)

    def reading(self) -> _Held:
        """The connection, held under the lock for a read (``with db.reading() as conn``)."""
        return self._reading

    @contextmanager
    def atomic(self) -> Iterator[Any]:
        """All or nothing; nests (savepoints). Yields the connection."""
        with self.lock:
            conn = self.conn
            if self._depth == 0:
                conn.execute("BEGIN IMMEDIATE")
                name = None
            else:
                name = f"kx_sp{next(_savepoints)}"
                conn.execute(f"SAVEPOINT {name}")
            self._depth += 1
            queued = len(self._after)
            try:
                yield conn
            except BaseException as exc:
                self._depth -= 1
                if name is None:
                    rollback(conn)
                    self._after.clear()
                else:
                    if conn.in_transaction:  # SQLite may have undone it all already
                        conn.execute(f"ROLLBACK TO {name}")
                        conn.execute(f"RELEASE {name}")
                    del self._after[queued:]  # what the undone block queued never happened
                self._raise_translated(exc)
                raise
            self._depth -= 1
            if name is not None:
                conn.execute(f"RELEASE {name}")
                return
            try:
                conn.execute("COMMIT")
            except BaseException as exc:
                rollback(conn)
                self._after.clear()
                self._raise_translated(exc)
                raise
            callbacks, self._after = self._after, []
        for callback in callbacks:
            callback()

    def _raise_translated(self, exc: BaseException) -> None:
        """Raise the ``StorageError`` a SQLite error on this file means (a row read
        inside the block can raise one the connection did not translate)."""
        error = storage_error(exc, self.path or ":memory:")
        if error is not None and error is not exc:
            raise error from exc

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` after the current outermost transaction commits (now if none)."""
        with self.lock:
            if self._depth:
                self._after.append(callback)
                return
        callback()

    def release(self) -> None:
        """One store is done with the database; the last user closes an owned connection."""
        with self.lock:
            self._users -= 1
            if self._users > 0 or self.closed:
                return
            self.closed = True
            if self.owned:
                for callback in _on_close:
                    callback(self.conn)
                self.conn.close()
            with _registry_lock:
                if _registry.get(id(self.conn)) is self:
                    del _registry[id(self.conn)]


class _Held:
    """``with`` it: the database's lock held, its connection yielded (a plain class,
    not a generator: every store read goes through it)."""

    __slots__ = ("db",)

    def __init__(self, db: Database) -> None:
        self.db = db

    def __enter__(self) -> Any:
        self.db.lock.acquire()
        return self.db.conn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.db.lock.release()
        if exc is not None:  # fetching rows raises outside the connection's execute
            self.db._raise_translated(exc)


def lock_for(conn: Any) -> threading.RLock:
    """The lock guarding ``conn``: its ``Database``'s when it has one (one lock per
    connection, whoever uses it), else a new one (a connection nobody shares)."""
    with _registry_lock:
        db = _registry.get(id(conn))
    if db is not None and db.conn is conn:
        return db.lock
    return threading.RLock()


_S = TypeVar("_S", bound="DatabaseStore")


class DatabaseStore:
    """Base of a store living in the shared database: opens (or joins) the ``Database``,
    brings the store's schema up to date, and releases its share on ``close``."""

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | Database | Any,
        component: str,
        migrations: Sequence[str],
    ) -> None:
        self.db = Database.open(path_or_conn)
        self._closed = False
        with self.db.lock:
            migrate(self.db.conn, component, migrations)

    @property
    def conn(self) -> Any:
        return self.db.conn

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.db.release()

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
