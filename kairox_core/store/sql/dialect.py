"""What differs between the SQL of SQLite and PostgreSQL, as far as the stores care.

The stores in ``kairox_core.store.sql`` write each statement once with ``?`` marks; a
``Dialect`` turns it into its database's spelling and answers the few questions whose
answers differ (which column orders rows by insertion, how a row is locked for the rest
of a transaction, whether writers to one key need a lock of their own, ...). Both
backends hand the stores a ``SqlDatabase``: its ``atomic()`` yields the connection of
the (possibly nested) write transaction, ``reading()`` a connection to read with.
Upserts (``ON CONFLICT ... DO UPDATE``, ``excluded.``), ``RETURNING`` and ``ON CONFLICT
DO NOTHING`` are spelled alike by both (SQLite 3.35 on), so they need no answer here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, Protocol, TypeVar


@dataclass(frozen=True)
class Dialect:
    """One database's spelling of the stores' SQL."""

    name: str
    placeholder: str  # the driver's parameter mark: ``?`` (sqlite3) or ``%s`` (psycopg)
    row_order: str  # the column that orders a table's rows by insertion
    for_update: str  # appended to a SELECT to lock its rows until the transaction ends
    writable_cte: bool  # ``WITH x AS (INSERT ...) UPDATE ...`` runs both in one statement
    key_lock: str | None  # a statement taking a transaction-long lock on one name (``?``)
    json_paths: bool  # ``->>`` takes one ``'$.a.b'`` path (SQLite), not a key per step
    greatest: str  # the larger of two values: ``max`` (SQLite's scalar form), ``GREATEST``
    least: str
    binary_collation: str  # appended to ORDER BY a text column: code-point order
    tables: tuple[tuple[str, str], ...] = ()  # a store's table name -> this database's

    def sql(self, text: str) -> str:
        """``text`` (written with ``?`` marks) in this dialect's parameter style."""
        if self.placeholder == "?":
            return text
        return _translate(text, self.placeholder)

    def table(self, name: str) -> str:
        """The name a store's table has in this database."""
        for ours, theirs in self.tables:
            if ours == name:
                return theirs
        return name

    def json_text(self, column: str, *path: str) -> str:
        """The text at ``path`` inside the JSON in ``column`` (NULL when absent)."""
        if self.json_paths:
            return f"{column} ->> '$.{'.'.join(path)}'"
        steps = "".join(f" -> '{key}'" for key in path[:-1])
        return f"{column}{steps} ->> '{path[-1]}'"

    def insert_ignore(self, table: str, columns: str, conflict: str) -> str:
        """``INSERT`` of one row (``?`` marks) that does nothing when ``conflict`` (the
        unique columns) already holds one, ``RETURNING 1`` when it inserted."""
        marks = ", ".join("?" * (columns.count(",") + 1))
        return self.sql(
            f"INSERT INTO {self.table(table)} ({columns}) VALUES ({marks}) "
            f"ON CONFLICT ({conflict}) DO NOTHING RETURNING 1"
        )


@lru_cache(maxsize=1024)
def _translate(text: str, placeholder: str) -> str:
    if "%" in text:
        text = text.replace("%", "%%")  # a literal percent sign, for format-style drivers
    return text.replace("?", placeholder)


SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    row_order="rowid",
    for_update="",  # BEGIN IMMEDIATE: the writer already holds the whole file
    writable_cte=False,
    key_lock=None,
    json_paths=True,
    greatest="max",
    least="min",
    binary_collation="",  # BINARY: SQLite's default
)

POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    row_order="n",
    for_update=" FOR UPDATE",
    writable_cte=True,
    key_lock="SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
    json_paths=False,
    greatest="GREATEST",
    least="LEAST",
    binary_collation=' COLLATE "C"',
    tables=(("leases", "kairox_leases"),),
)


class SqlDatabase(Protocol):
    """A database the SQL stores run on: the built-in SQLite ``Database`` or a backend's."""

    @property
    def dialect(self) -> Dialect: ...

    def atomic(self) -> AbstractContextManager[Any]:
        """All or nothing; nests. Yields the connection to write with."""
        ...

    def reading(self) -> AbstractContextManager[Any]:
        """A connection to read with (the open transaction's, inside ``atomic()``)."""
        ...

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the outermost transaction commits (now if none)."""
        ...


DB = TypeVar("DB", bound=SqlDatabase)


class SqlStore(Generic[DB]):
    """Base of a store written once over a ``SqlDatabase`` (typed by the backend's)."""

    db: DB

    def __init__(self, db: DB) -> None:
        self.db = db

    def _sql(self, text: str) -> str:
        return self.db.dialect.sql(text)

    def close(self) -> None:
        """Nothing of its own to release: whoever opened the database closes it."""


__all__ = ["DB", "POSTGRES", "SQLITE", "Dialect", "SqlDatabase", "SqlStore"]
