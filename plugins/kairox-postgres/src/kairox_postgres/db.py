"""One PostgreSQL database shared by the stores: a connection pool and nested transactions.

The SQLite storage shares one connection behind a lock; here every thread borrows its
own connection from a ``psycopg_pool.ConnectionPool``. ``atomic()`` pins the borrowed
connection to the thread for the outermost block (so the event log, the memory store
and the proposals all write in one transaction) and opens a savepoint inside. Reads
outside a block borrow a connection in autocommit mode and give it back at once.
Callbacks queued with ``after_commit`` (event observers) run once the outermost block
has committed, never for an undone block.

Outages are survivable: a borrowed connection idle for a while is checked first (one
empty query) and a broken one discarded. When the pool has none to give within ``BORROW_WAIT`` (or a
connection failed since), the call connects directly (``CONNECT_TIMEOUT``): a server that
is down fails it at once with ``StorageUnavailableError`` instead of after the pool's
timeout, and a server that is back serves it on that connection while the pool, whose
reconnection attempts back off, catches up (its dead connections dropped). Errors of the server's
(unreachable, wrong password, missing privileges or extension, full disk) are said as
``StorageError``s naming the server (errors.py).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from kairox_core.store.sql import POSTGRES, Dialect
from kairox_postgres.errors import PostgresConfigError, server_error

# libpq's connect timeout (it counts 2 s at least): how long a server that does not
# answer (a host down, a firewall) holds a call before it fails
CONNECT_TIMEOUT = 5
# how long a call waits for a free connection of a pool whose server answers
ACQUIRE_TIMEOUT = 30.0
# how long a call waits for a pooled connection before asking the server directly (an
# empty pool is an outage or a pool still reconnecting after one, or every connection busy)
BORROW_WAIT = 1.0
# a pooled connection idle longer than this is checked (one empty query) before use: a
# restart in between broke it. One used more recently goes without: a failure on it
# marks the server down, and the next call asks the server first.
CHECK_IDLE = 1.0

ENV_PREFIX = "$env:"
_ENV_IN_PASSWORD = re.compile(r"^\$env:([A-Za-z_][A-Za-z0-9_]*)$")


def resolve_url(url: str) -> str:
    """``url`` with a ``$env:NAME`` password (or a whole ``$env:NAME`` URL) resolved.

    Done at connect time only, so the secret never lands in a config dump or a message.
    ``postgres://`` and ``postgresql+psycopg://`` are accepted as spellings of the scheme.
    """
    if url.startswith(ENV_PREFIX):
        url = _env(url[len(ENV_PREFIX) :], "the database URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise PostgresConfigError(
            f"the database URL {redact_url(url)} is malformed ({exc}); write it as "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise PostgresConfigError(f"not a postgresql:// URL: {redact_url(url)}")
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, sep, password = userinfo.partition(":")
        match = _ENV_IN_PASSWORD.match(unquote(password)) if sep else None
        if match:
            secret = _env(match.group(1), "the database password")
            netloc = f"{user}:{quote(secret, safe='')}@{host}"
    return urlunsplit(("postgresql", netloc, parts.path, parts.query, parts.fragment))


def _env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise PostgresConfigError(
            f"environment variable {name} ({what}) is not set; export {name}=... first"
        )
    return value


def redact_url(url: str) -> str:
    """The URL for messages: any password replaced by ``***`` (a ``$env:`` name kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a malformed URL>"
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, sep, password = userinfo.partition(":")
    if sep and password and not unquote(password).startswith(ENV_PREFIX):
        userinfo = f"{user}:***"
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, ""))


class _Local(threading.local):
    def __init__(self) -> None:
        self.conn: psycopg.Connection[Any] | None = None
        self.depth = 0
        self.after: list[Callable[[], None]] = []


class PgDatabase:
    """A pool plus the per-thread transaction state every store on it shares."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8) -> None:
        self.url = url
        self.location = redact_url(url)
        self._conninfo = resolve_url(url)
        self._down = False  # a connection failed: ask the server before the next borrow
        self._probe()  # a wrong password, a server away: said now, not after a pool timeout
        try:
            self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                self._conninfo,
                min_size=min_size,
                max_size=max_size,
                kwargs={
                    "autocommit": True,
                    "row_factory": dict_row,
                    "connect_timeout": CONNECT_TIMEOUT,
                },
                timeout=ACQUIRE_TIMEOUT,
                open=False,
            )
            self.pool.open(wait=True, timeout=ACQUIRE_TIMEOUT)
        except (psycopg.Error, PoolTimeout) as exc:
            self._reraise(exc)
        self._local = _Local()
        self.closed = False

    dialect: Dialect = POSTGRES  # the core's SQL stores' spelling (kairox_core.store.sql)

    def _error(self, exc: BaseException) -> BaseException:
        """The ``StorageError`` ``exc`` means (marking the server down when it is away)."""
        error = server_error(exc, self.location)
        if error is None:
            return exc
        if isinstance(exc, psycopg.OperationalError | PoolTimeout):
            self._down = True
        return error

    def _reraise(self, exc: BaseException) -> NoReturn:
        """Raise what ``exc`` means (itself when it is not the server's)."""
        error = self._error(exc)
        if error is exc:
            raise exc
        raise error from exc

    def _probe(self) -> None:
        """Connect once, directly: ``StorageError`` saying why when that fails."""
        self._direct().close()

    def _direct(self) -> psycopg.Connection[Any]:
        """A connection of its own, outside the pool (``StorageError`` when refused)."""
        try:
            return psycopg.connect(
                self._conninfo,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=CONNECT_TIMEOUT,
            )
        except psycopg.Error as exc:
            self._reraise(exc)

    def _borrow(self) -> tuple[psycopg.Connection[Any], bool]:
        """A connection that answers, and whether it is the pool's; ``StorageError`` at
        once when the server does not answer."""
        if not self._down:
            try:
                conn = self.pool.getconn(timeout=BORROW_WAIT)
            except PoolTimeout:
                conn = None
            if conn is not None:
                if time.monotonic() - getattr(conn, "_kx_returned", 0.0) < CHECK_IDLE:
                    return conn, True  # in use a moment ago (a failure since: _down)
                try:
                    ConnectionPool.check_connection(conn)
                    return conn, True
                except psycopg.Error:
                    self.pool.putconn(conn)  # broken (a restart, an outage): discarded
        direct = self._direct()  # the server away: StorageUnavailableError now
        if self._down:
            self._down = False
            self.pool.check()  # back: drop the connections the outage broke
        if self.pool.get_stats().get("pool_size", 0) < self.pool.max_size:
            return direct, False  # the pool is still reconnecting: this call goes on
        direct.close()  # every connection is in use: wait for one like any client
        try:
            conn = self.pool.getconn()
        except PoolTimeout as exc:
            self._reraise(exc)
        return conn, True

    def _give_back(self, conn: psycopg.Connection[Any], pooled: bool) -> None:
        if pooled:
            conn._kx_returned = time.monotonic()  # type: ignore[attr-defined, unused-ignore]
            self.pool.putconn(conn)  # a broken one is discarded, a transaction rolled back
        else:
            conn.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's connection inside ``atomic()``, else one borrowed for the call."""
        pinned = self._local.conn
        if pinned is not None:
            yield pinned
            return
        # getconn/putconn, not pool.connection(): that one also runs the connection's
        # own ``with`` (a commit), which an autocommit connection never needs; putconn
        # still discards a broken connection and rolls back one left in a transaction.
        conn, pooled = self._borrow()
        try:
            yield conn
        except psycopg.Error as exc:
            self._reraise(exc)
        finally:
            self._give_back(conn, pooled)

    reading = connection  # the name the core's SQL stores read with

    def execute(self, sql: Any, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Run one statement; its rows (empty for a statement returning none)."""
        with self.connection() as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []

    @contextmanager
    def atomic(self) -> Iterator[psycopg.Connection[Any]]:
        """All or nothing; nests (savepoints). Yields the connection to write with."""
        local = self._local
        if local.conn is not None:
            queued = len(local.after)
            local.depth += 1
            try:
                with local.conn.transaction():
                    yield local.conn
            except BaseException:
                del local.after[queued:]  # what the undone block queued never happened
                raise
            finally:
                local.depth -= 1
            return
        conn, pooled = self._borrow()
        try:
            local.conn, local.depth, local.after = conn, 1, []
            try:
                with conn.transaction():
                    yield conn
            except BaseException:
                local.after = []
                raise
            finally:
                local.conn, local.depth = None, 0
            callbacks, local.after = local.after, []
        except psycopg.Error as exc:
            self._reraise(exc)
        finally:
            self._give_back(conn, pooled)
        for callback in callbacks:
            callback()

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` after this thread's outermost transaction commits (now if none)."""
        if self._local.conn is not None:
            self._local.after.append(callback)
            return
        callback()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.close()


__all__ = ["PgDatabase", "PostgresConfigError", "redact_url", "resolve_url"]
