"""A damaged, full or read-only SQLite database under the real CLI, and ``kairox db copy``
killed half-way (issue 27, item 3). The full disk is a small tmpfs and the read-only
mount a bind mount: both need root (CI runs as root), else they skip saying so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import WAIT, Lines, kairox, said_clearly

from kairox_core.testing.faults import DAMAGE


def _healthy(config: Path, path: Path) -> Path:
    prompts = "".join(f"question {i} " + "lorem ipsum " * 30 + "\n" for i in range(12))
    assert kairox(config, path, "chat", "--plain", stdin=prompts).returncode == 0
    assert kairox(config, path, "memory", "add", "--key", "editor", "helix").returncode == 0
    subprocess.run(  # fold the WAL into the file: the damage below hits everything
        [
            sys.executable,
            "-c",
            "import sqlean,sys; c=sqlean.connect(sys.argv[1]); "
            "c.execute('PRAGMA wal_checkpoint(TRUNCATE)')",
            str(path),
        ],
        check=True,
    )
    return path


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from kairox_core.testing.serve import write_config

    root = tmp_path_factory.mktemp("healthy")
    config = write_config(root / "kairox.toml", ["an answer"])
    return config, _healthy(config, root / "kairox.db")


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_every_command_on_a_damaged_file_says_so_without_a_traceback(
    tmp_path: Path, healthy: tuple[Path, Path], how: str
) -> None:
    config, source = healthy
    db = tmp_path / "kairox.db"
    shutil.copy(source, db)
    DAMAGE[how](db)
    for args, stdin in (
        (("sessions",), ""),
        (("memory", "add", "--key", "k", "v"), ""),
        (("chat", "--plain"), "hello\n"),
    ):
        line = said_clearly(kairox(config, db, *args, stdin=stdin))
        assert str(db) in line and "kairox db check" in line, line
    check = kairox(config, db, "db", "check")
    assert check.returncode == 1 and check.stdout.startswith(f"damaged: {db}")


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here (root needed): {done.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a tmpfs needs root")
    where = tmp_path / "disk"
    where.mkdir()
    _mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where))
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_is_said_and_nothing_is_lost(
    small_disk: Path, config: Path, healthy: tuple[Path, Path]
) -> None:
    db = small_disk / "kairox.db"
    assert kairox(config, db, "chat", "--plain", stdin="first\n").returncode == 0
    sid = _session(config, db)
    before = kairox(config, db, "events", sid).stdout
    filler = _fill(small_disk)
    for args, stdin in (
        (("chat", "--plain", "--session", sid), "x " * 50000 + "\n"),
        (("memory", "add", "--key", "k", "v" * 1900), ""),
    ):
        result = kairox(config, db, *args, stdin=stdin)
        assert "Traceback" not in result.stderr, result.stderr
        assert "disk is full" in result.stderr and "free space" in result.stderr, result.stderr
        assert result.returncode != 0
    filler.unlink()
    assert kairox(config, db, "events", sid).stdout == before  # nothing half-way
    after = kairox(config, db, "chat", "--plain", "--session", sid, stdin="again\n")
    assert after.returncode == 0, after.stderr


def _session(config: Path, db: Path) -> str:
    listing = kairox(config, db, "sessions").stdout
    return next(w for w in listing.split() if w.startswith("s-"))


def test_a_read_only_mount_is_said(
    tmp_path: Path, config: Path, healthy: tuple[Path, Path]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(healthy[1], source / "kairox.db")
    ro = tmp_path / "ro"
    ro.mkdir()
    _mount("--bind", str(source), str(ro))
    try:
        _mount("-o", "remount,bind,ro", str(ro))
        db = ro / "kairox.db"
        for args in (("sessions",), ("memory", "add", "--key", "k", "v")):
            line = said_clearly(kairox(config, db, *args))
            assert str(db) in line and "writable" in line, line
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


HANG = """
import sys, threading
from kairox_postgres import copy
insert = copy._Sqlite.insert
def halfway(self, table, columns, rows):
    insert(self, table, columns, rows)
    if table == "events":
        print("COPY_HALFWAY", flush=True)
        threading.Event().wait()
copy._Sqlite.insert = halfway
copy.copy_database(sys.argv[1], sys.argv[2])
"""


def test_db_copy_killed_half_way_leaves_a_target_the_next_copy_completes(
    tmp_path: Path, config: Path, healthy: tuple[Path, Path]
) -> None:
    pytest.importorskip("kairox_postgres")
    target = tmp_path / "copy.db"
    process = subprocess.Popen(
        [sys.executable, "-c", HANG, str(healthy[1]), str(target)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        Lines(process.stdout).wait_for("COPY_HALFWAY")  # events inserted, not committed
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=WAIT)
    again = kairox(config, healthy[1], "db", "copy", str(healthy[1]), str(target))
    assert again.returncode == 0, again.stderr
    assert "verified:" in again.stdout
    refused = kairox(config, healthy[1], "db", "copy", str(healthy[1]), str(target))
    line = said_clearly(refused)
    assert "is not empty" in line and "copy into a new database" in line
