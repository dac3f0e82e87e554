"""One PostgreSQL database shared by the stores: a connection pool and nested transactions.

The SQLite storage shares one connection behind a lock; here every thread borrows its
own connection from a ``psycopg_pool.ConnectionPool``. ``atomic()`` pins the borrowed
connection to the thread for the outermost block (so the event log, the memory store
and the proposals all write in one transaction) and opens a savepoint inside. Reads
outside a block borrow a connection in autocommit mode and give it back at once.
Callbacks queued with ``after_commit`` (event observers) run once the outermost block
has committed, never for an undone block.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from kairox_core.errors import KairoxUserError
from kairox_core.store.sql import POSTGRES, Dialect

ENV_PREFIX = "$env:"
_ENV_IN_PASSWORD = re.compile(r"^\$env:([A-Za-z_][A-Za-z0-9_]*)$")


class PostgresConfigError(KairoxUserError):
    """A ``postgresql://`` URL that cannot be used (an unset ``$env:`` password, a typo)."""


def resolve_url(url: str) -> str:
    """``url`` with a ``$env:NAME`` password (or a whole ``$env:NAME`` URL) resolved.

    Done at connect time only, so the secret never lands in a config dump or a message.
    ``postgres://`` and ``postgresql+psycopg://`` are accepted as spellings of the scheme.
    """
    if url.startswith(ENV_PREFIX):
        url = _env(url[len(ENV_PREFIX) :], "the database URL")
    parts = urlsplit(url)
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
    parts = urlsplit(url)
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
        conninfo = resolve_url(url)
        try:
            self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                conninfo,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True, "row_factory": dict_row},
                open=False,
            )
            self.pool.open(wait=True, timeout=30)
        except psycopg.Error as exc:
            raise PostgresConfigError(f"cannot connect to {self.location}: {exc}") from exc
        except Exception as exc:  # the pool's PoolTimeout carries the server's refusal
            raise PostgresConfigError(f"cannot connect to {self.location}: {exc}") from exc
        self._local = _Local()
        self.closed = False

    dialect: Dialect = POSTGRES  # the core's SQL stores' spelling (kairox_core.store.sql)

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
        conn = self.pool.getconn()
        try:
            yield conn
        finally:
            self.pool.putconn(conn)

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
        conn = self.pool.getconn()
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
        finally:
            self.pool.putconn(conn)
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
