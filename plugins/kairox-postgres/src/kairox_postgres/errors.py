"""What the server's refusals mean, said as ``StorageError``s: what, where, how to fix.

A psycopg error carries a SQLSTATE (``exc.sqlstate``) or, for a connection that never
opened, only libpq's message; ``server_error`` turns both into the core's storage errors
(the CLI prints them without a traceback, ``kairox serve`` answers 503 or 507).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
from psycopg_pool import PoolTimeout

from kairox_core.errors import (
    StorageError,
    StorageFullError,
    StorageReadOnlyError,
    StorageUnavailableError,
)


class PostgresConfigError(StorageError):
    """A ``postgresql://`` URL or server set-up that cannot be used (a malformed URL, an
    unset ``$env:`` password, a wrong password, a missing database, privilege or
    extension)."""


_URL_FORM = "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
_VECTOR_FIX = (
    "have a superuser run `CREATE EXTENSION vector;` in this database once (the package "
    "is pgvector: e.g. `apt install postgresql-18-pgvector` on the server), then retry"
)


def server_error(exc: BaseException, location: str) -> StorageError | None:
    """The ``StorageError`` ``exc`` (from psycopg or the pool) means for the server at
    ``location``, or None when it is not the server's (a bug in a statement)."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, PoolTimeout):
        return StorageUnavailableError(
            f"PostgreSQL at {location} handed out no connection in time ({exc}); nothing "
            "was recorded. Fix: retry; if it lasts, raise the server's max_connections or "
            "look for clients holding connections"
        )
    if not isinstance(exc, psycopg.Error):
        return None
    state = getattr(exc, "sqlstate", None) or ""
    reason = _first_lines(str(exc))
    lowered = reason.lower()
    if isinstance(exc, psycopg.ProgrammingError) and state == "":
        return PostgresConfigError(
            f"the database URL {location} is malformed ({reason}); write it as {_URL_FORM}"
        )
    if state == "28P01" or "password authentication failed" in lowered:
        return PostgresConfigError(
            f"PostgreSQL at {location} refused the password ({reason}). Fix: correct the "
            "password in the URL (or the environment variable its $env: names)"
        )
    if state == "28000" or (state == "" and "role" in lowered and "does not exist" in lowered):
        return PostgresConfigError(
            f"PostgreSQL at {location} refused the role ({reason}). Fix: use a role that "
            "exists and may log in from here (pg_hba.conf), or create it"
        )
    if state == "3D000" or (state == "" and "database" in lowered and "does not exist" in lowered):
        return PostgresConfigError(
            f"PostgreSQL at {location}: the database does not exist ({reason}). Fix: "
            "create it (`createdb NAME`, or CREATE DATABASE as a role that may)"
        )
    if "extension" in lowered and ("vector" in lowered or state in ("58P01", "0A000")):
        return PostgresConfigError(
            f"PostgreSQL at {location} cannot provide the vector extension ({reason}). "
            f"Kairox stores embeddings with pgvector. Fix: {_VECTOR_FIX}"
        )
    if state == "42501":
        role = _role(location)
        return PostgresConfigError(
            f"PostgreSQL at {location}: the role {role} lacks a privilege Kairox needs "
            f"({reason}). Fix: as the database's owner, `GRANT CREATE, USAGE ON SCHEMA "
            f"public TO {role};` (Kairox creates its tables there on first use), or run "
            "`kairox db migrate` once as a role that may"
        )
    if state == "53100":
        return StorageFullError(
            f"PostgreSQL at {location} is out of disk space ({reason}); nothing was "
            "recorded. Fix: free space on the server's disk, then retry"
        )
    if state == "25006":
        return StorageReadOnlyError(
            f"PostgreSQL at {location} is read-only ({reason}); nothing was recorded. Fix: "
            "point the URL at the primary server, not a standby"
        )
    if state == "57014":
        return None  # a statement cancelled (statement_timeout): its caller's to say
    if isinstance(exc, psycopg.OperationalError) or state.startswith(("08", "57P")):
        return StorageUnavailableError(
            f"PostgreSQL at {location} cannot be reached ({reason}); nothing was recorded. "
            "Fix: start the server (or check the host, port and network); Kairox "
            "reconnects by itself, so retry once it answers"
        )
    return None


def _role(location: str) -> str:
    try:
        return urlsplit(location).username or "<role>"
    except ValueError:
        return "<role>"


def _first_lines(text: str) -> str:
    """libpq's message on one line (it adds hints on following lines)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:2]) or type(text).__name__


__all__ = ["PostgresConfigError", "server_error"]
