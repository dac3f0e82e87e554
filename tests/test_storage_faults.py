"""A damaged, full, locked or read-only SQLite database is reported (a ``StorageError``
naming the file and the fix), never a traceback, never silent loss (issue 27, item 3).

The damage is real (files truncated, overwritten, garbled); a full disk is SQLite's own
``SQLITE_FULL`` (``PRAGMA max_page_count`` at the file's size); a lock is a second
connection holding the write lock. The web API's answers (it needs the [web] extra) and
the processes (a CLI on a full tmpfs, a read-only mount, kill -9 mid-copy) are in
``tests_faults/`` (``nox -s faults``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.cli import main
from kairox_core.config import KairoxConfig
from kairox_core.errors import (
    StorageDamagedError,
    StorageError,
    StorageFullError,
    StorageReadOnlyError,
    StorageUnavailableError,
)
from kairox_core.store import SqliteStorage
from kairox_core.store.check import check_sqlite
from kairox_core.store.connection import connect, storage_error
from kairox_core.store.database import Database
from kairox_core.testing.faults import DAMAGE, fill, unfill


def _healthy(path: Path) -> Path:
    """A database with sessions, turns and memories (pages beyond the first few)."""
    with Kairox.open(path, KairoxConfig()) as kx:
        for n in range(3):
            session = kx.session()
            for i in range(8):
                session.run_turn_sync(f"question {n}.{i} " + "lorem ipsum " * 40, "an answer")
    return path


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = _healthy(tmp_path_factory.mktemp("db") / "healthy.db")
    with connect(path) as conn:  # fold the WAL in: the damage hits the one file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _damaged(healthy: Path, tmp_path: Path, how: str) -> Path:
    target = tmp_path / "kairox.db"
    target.write_bytes(healthy.read_bytes())
    DAMAGE[how](target)
    return target


def _use(path: Path) -> None:
    """What a person does first: open, list the sessions, read one, write a turn."""
    with Kairox.open(path, KairoxConfig()) as kx:
        infos = kx.sessions()
        for info in infos:
            list(kx.events_store.read(info.session_id))
        kx.session().run_turn_sync("still there?", "yes")


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_file_is_a_storage_error_naming_it_and_the_fix(
    kairox_home: Path, healthy: Path, tmp_path: Path, how: str
) -> None:
    path = _damaged(healthy, tmp_path, how)
    with pytest.raises(StorageDamagedError) as caught:
        _use(path)
    message = str(caught.value)
    assert str(path) in message
    assert "kairox db check" in message and "backup" in message


def _db_check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["db", "check", str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return int(exited.value.code or 0), out, err


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_db_check_reports_the_damage_and_exits_1(
    kairox_home: Path,
    healthy: Path,
    tmp_path: Path,
    how: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _damaged(healthy, tmp_path, how)
    code, out, _ = _db_check(path, capsys)
    assert code == 1, out
    assert out.startswith(f"damaged: {path}")
    assert "fix: restore" in out
    assert check_sqlite(str(path)).ok is False


def test_db_check_passes_a_healthy_file_and_refuses_a_missing_one(
    kairox_home: Path, healthy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _db_check(healthy, capsys)
    assert code == 0, out
    assert out.startswith(f"ok: {healthy}: integrity check passed (")
    assert " events)" in out
    code, _, err = _db_check(tmp_path / "none.db", capsys)
    assert code == 2
    assert err.startswith(f"kairox: error: no database file at {tmp_path / 'none.db'}")


def _full(kx: Kairox) -> None:
    fill(kx.storage.db.conn)  # type: ignore[attr-defined]


def _unfull(kx: Kairox) -> None:
    unfill(kx.storage.db.conn)  # type: ignore[attr-defined]


def _event_count(kx: Kairox, session_id: str) -> int:
    return len(list(kx.events_store.read(session_id)))


def test_a_full_disk_fails_the_turn_records_nothing_and_the_next_turn_works(
    kairox_home: Path, tmp_path: Path
) -> None:
    with Kairox.open(tmp_path / "kx.db", KairoxConfig()) as kx:
        session = kx.session()
        session.run_turn_sync("first", "one")
        before = _event_count(kx, session.id)
        _full(kx)
        big = "a long prompt that needs new pages " * 2000
        with pytest.raises(StorageFullError) as caught:
            session.run_turn_sync(big, "a long reply " * 2000)
        assert str(tmp_path / "kx.db") in str(caught.value)
        assert "free space" in str(caught.value)
        assert _event_count(kx, session.id) == before  # nothing half-way
        _unfull(kx)
        result = session.run_turn_sync("again", "two")
        assert result.assistant_seq > 0
        assert _event_count(kx, session.id) > before


def test_a_locked_database_says_so(kairox_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "kx.db"
    SqliteStorage(str(path)).close()
    holder = connect(path)
    holder.execute("BEGIN IMMEDIATE")  # another process's write, never finishing
    conn = connect(path, busy_timeout=0.01)
    try:
        with pytest.raises(StorageUnavailableError) as caught:
            SqliteStorage(Database.open(conn))  # its first write: the schema check
        assert str(path) in str(caught.value) and "locked by another process" in str(caught.value)
    finally:
        conn.close()
        holder.execute("ROLLBACK")
        holder.close()


def _write_memory(storage: Any) -> None:
    from kairox_core.events import SessionStarted

    storage.events.append(SessionStarted(session_id="s-lock", workspace_id="w", profile="p"))


def test_a_read_only_database_says_what_to_make_writable(kairox_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "kx.db"
    SqliteStorage(str(path)).close()
    conn = connect(path)
    conn.execute("PRAGMA query_only = ON")  # SQLITE_READONLY, as on a read-only mount
    try:
        with pytest.raises(StorageReadOnlyError) as caught:
            SqliteStorage(Database.open(conn))  # its first write: the schema check
        assert str(path) in str(caught.value) and "writable" in str(caught.value)
    finally:
        conn.close()


def test_an_unopenable_folder_says_so(kairox_home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StorageReadOnlyError, match="cannot create the folder"):
        Kairox.open(blocker / "sub" / "kx.db", KairoxConfig())


# --- the translation itself


def test_errors_that_are_not_the_files_stay_as_they_are(tmp_path: Path) -> None:
    conn = connect(tmp_path / "kx.db")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES ('a')")
    with pytest.raises(Exception) as constraint:
        conn.execute("INSERT INTO t VALUES ('a')")
    assert not isinstance(constraint.value, StorageError)  # an IntegrityError, for its caller
    with pytest.raises(Exception) as syntax:
        conn.execute("SELEC 1")
    assert not isinstance(syntax.value, StorageError)
    conn.close()


@given(st.text(max_size=80))
def test_storage_error_leaves_any_other_exception_alone(message: str) -> None:
    for exc in (ValueError(message), RuntimeError(message), KeyError(message)):
        assert storage_error(exc, "/x.db") is None
