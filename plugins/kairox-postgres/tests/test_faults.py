"""PostgreSQL outages and set-up mistakes are said clearly and survived (issue 27, item 2).

A server of this module's own (``outage_server``) is stopped and started again; the
others get fresh databases and roles on the session's server. The processes (``kairox
serve`` answering 503 during an outage, ``chat --plain`` carrying on) are in
``tests_faults/`` (``nox -s faults``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.errors import StorageUnavailableError
from kairox_postgres.db import PgDatabase
from kairox_postgres.errors import PostgresConfigError, server_error
from kairox_postgres.testing import PgTestServer


@pytest.fixture(scope="module")
def outage_server() -> Iterator[PgTestServer]:
    server = PgTestServer()
    yield server
    server.start()  # a failed test may leave it stopped: cleanup stops it again
    server.close()


def _events(kx: Kairox, session_id: str) -> int:
    return len(list(kx.events_store.read(session_id)))


def test_a_turn_during_an_outage_fails_clearly_and_the_next_one_after_succeeds(
    kairox_home: Path, outage_server: PgTestServer
) -> None:
    url = outage_server.fresh_database()
    with Kairox.open(url, KairoxConfig()) as kx:
        session = kx.session()
        session.run_turn_sync("before", "fine")
        before = _events(kx, session.id)
        outage_server.stop()
        try:
            for _ in range(2):  # the broken pooled connection, then the probe
                with pytest.raises(StorageUnavailableError) as caught:
                    session.run_turn_sync("during", "lost")
                message = str(caught.value)
                assert "cannot be reached" in message and "start the server" in message
                assert kx.storage.location in message
        finally:
            outage_server.start()
        result = session.run_turn_sync("after", "back")  # same process, same Kairox
        assert result.assistant_seq > 0
        texts = [getattr(e, "text", "") for e in kx.events_store.read(session.id)]
        assert "during" not in texts and "lost" not in texts  # nothing half-way
        assert _events(kx, session.id) > before
        assert "after" in texts and "back" in texts


def test_opening_while_the_server_is_down_fails_at_once(
    kairox_home: Path, outage_server: PgTestServer
) -> None:
    url = outage_server.fresh_database()
    outage_server.stop()
    try:
        with pytest.raises(StorageUnavailableError, match="cannot be reached"):
            Kairox.open(url, KairoxConfig())
    finally:
        outage_server.start()
    Kairox.open(url, KairoxConfig()).close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://kx@localhost:notaport/kx",
        "postgresql://kx@localhost/kx?no_such_option=1",
        "postgresql://kx@[::1/kx",
    ],
)
def test_a_malformed_url_says_how_to_write_one(url: str) -> None:
    with pytest.raises(PostgresConfigError) as caught:
        PgDatabase(url)
    assert "malformed" in str(caught.value)
    assert "postgresql://USER:PASSWORD@HOST:PORT/DATABASE" in str(caught.value)


def _role(server: PgTestServer, *, password: str | None = None) -> str:
    name = f"kx_role_{uuid.uuid4().hex[:8]}"
    secret = f" PASSWORD '{password}'" if password else ""
    server.psql_admin(f"CREATE ROLE {name} LOGIN{secret}")
    return name


def _as(url: str, role: str, password: str | None = None) -> str:
    user = f"{role}:{password}" if password else role
    return url.replace("postgresql://postgres:@", f"postgresql://{user}@", 1)


def test_a_wrong_password_is_refused_at_once_with_what_to_fix(
    outage_server: PgTestServer,
) -> None:
    role = _role(outage_server, password="right-one")
    hba = Path(outage_server._server.pgdata) / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text(f"local all {role} scram-sha-256\n" + original)
    outage_server.psql_admin("SELECT pg_reload_conf()")
    try:
        url = _as(outage_server.fresh_database(), role, "wrong-one")
        with pytest.raises(PostgresConfigError) as caught:
            PgDatabase(url)
        message = str(caught.value)
        assert "refused the password" in message and "wrong-one" not in message
        assert "***" in message  # the URL is named with its password hidden
        PgDatabase(_as(outage_server.fresh_database(), role, "right-one")).close()
    finally:
        hba.write_text(original)
        outage_server.psql_admin("SELECT pg_reload_conf()")


def test_a_role_without_create_on_public_is_told_what_to_grant(
    kairox_home: Path, pg_server: PgTestServer
) -> None:
    role = _role(pg_server)
    url = _as(pg_server.fresh_database(), role)
    with pytest.raises(PostgresConfigError) as caught:
        Kairox.open(url, KairoxConfig())
    message = str(caught.value)
    assert f"the role {role} lacks a privilege" in message
    assert f"GRANT CREATE, USAGE ON SCHEMA public TO {role};" in message


def test_a_database_without_the_vector_extension_says_how_to_add_it(
    kairox_home: Path, pg_server: PgTestServer
) -> None:
    role = _role(pg_server)
    admin_url = pg_server.fresh_database()
    with psycopg.connect(admin_url, autocommit=True) as conn:  # CREATE granted: vector next
        conn.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")  # type: ignore[arg-type]
    with pytest.raises(PostgresConfigError) as caught:
        Kairox.open(_as(admin_url, role), KairoxConfig())
    message = str(caught.value)
    assert "cannot provide the vector extension" in message
    assert "CREATE EXTENSION vector" in message and "pgvector" in message


def test_an_extension_the_server_lacks_is_said_as_the_vector_fix(pg_server: PgTestServer) -> None:
    with (
        psycopg.connect(pg_server.fresh_database(), autocommit=True) as conn,
        pytest.raises(psycopg.Error) as raised,
    ):
        conn.execute("CREATE EXTENSION kx_not_installed_anywhere")
    error = server_error(raised.value, "postgresql://somewhere/kx")
    assert isinstance(error, PostgresConfigError)
    assert "vector extension" in str(error) and "apt install" in str(error)


def test_db_check_reports_a_healthy_server_database(
    kairox_home: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kairox_core.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["db", "check", pg_url])
    out = capsys.readouterr().out
    assert exited.value.code in (0, None), out
    assert "answers" in out and "schema up to date" in out and "vector extension" in out
