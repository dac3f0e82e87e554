"""``kairox db check`` for a SQLite file: SQLite's own ``PRAGMA integrity_check``.

The file is opened read-only and with SQLite's errors as they are (not translated), so
a file that is not a database, or is truncated, is reported as damage like any other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kairox_core.errors import StorageError
from kairox_core.store.connection import DatabaseError, connect

MAX_PROBLEMS = 20  # integrity_check's lines shown (it lists every damaged page)


@dataclass
class CheckReport:
    """What a check found: ``ok`` and the lines to print."""

    target: str
    ok: bool
    lines: list[str] = field(default_factory=list)


def check_sqlite(path: str) -> CheckReport:
    """Run ``PRAGMA integrity_check`` on the database file ``path``."""
    if not os.path.isfile(path):
        raise StorageError(f"no database file at {path}; check the path (--db or the argument)")
    fix = f"restore {path} from a backup (or move it aside: Kairox starts a new one)"
    try:
        conn = connect(path, vec=False, readonly=True, translate=False)
    except DatabaseError as exc:
        return CheckReport(path, False, [f"damaged: {path}: {exc}", f"fix: {fix}"])
    try:
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA integrity_check({MAX_PROBLEMS})")]
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        events = _count(conn, "events")
    except DatabaseError as exc:
        return CheckReport(path, False, [f"damaged: {path}: {exc}", f"fix: {fix}"])
    finally:
        conn.close()
    if rows == ["ok"]:
        held = f", {events} events" if events is not None else ""
        line = f"ok: {path}: integrity check passed ({pages} pages{held})"
        return CheckReport(path, True, [line])
    lines = [f"damaged: {path}: integrity check found problems:"]
    lines += [f"  {line}" for row in rows for line in row.splitlines()]
    if len(rows) >= MAX_PROBLEMS:
        lines.append(f"  (the first {MAX_PROBLEMS} shown)")
    lines.append(
        f"fix: {fix}; to salvage what is readable, `sqlite3 {path} .recover | sqlite3 new.db`"
    )
    return CheckReport(path, False, lines)


def _count(conn: object, table: str) -> int | None:
    try:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[attr-defined]
    except DatabaseError:
        return None  # not a Kairox database (yet): integrity is all we check
    return int(row[0])


__all__ = ["CheckReport", "check_sqlite"]
