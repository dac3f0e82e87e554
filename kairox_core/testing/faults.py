"""Damage for the fault tests: what a crash, a bad disk or a stray write does to a
SQLite file, and SQLite's own "disk full" on demand (tests/test_storage_faults.py and
tests_faults/, issue 27)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE = 4096


def truncate_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def truncate_100(path: Path) -> None:
    os.truncate(path, 100)


def overwrite_header(path: Path) -> None:
    """SQLite's 100-byte header (its magic string first) overwritten."""
    with path.open("r+b") as f:
        f.write(b"\x00garbage" * 12 + b"\x00" * 4)


def corrupt_pages(path: Path) -> None:
    """Every page after the schema page garbled (the same bytes every run): the tables'
    b-trees are nonsense while the file still opens."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        for offset in range(PAGE, size, PAGE):
            f.seek(offset)
            f.write(bytes((offset // PAGE * 37 + i) % 251 for i in range(PAGE)))


def not_a_database(path: Path) -> None:
    path.write_text("these are my notes, not a database\n" * 200, encoding="utf-8")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated to 50%": truncate_half,
    "truncated to 100 bytes": truncate_100,
    "overwritten header": overwrite_header,
    "corrupt pages": corrupt_pages,
    "not a database": not_a_database,
}


def fill(conn: Any) -> None:
    """SQLITE_FULL on ``conn`` from now on: the file may not grow by a page."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def unfill(conn: Any) -> None:
    conn.execute("PRAGMA max_page_count = 1073741823")


__all__ = ["DAMAGE", "corrupt_pages", "fill", "unfill"]
