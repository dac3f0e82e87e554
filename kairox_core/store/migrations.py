"""Versioned schema migrations, one numbered list per component.

Each component (event store, memory store, retrieval index...) owns a name and an
ordered list of SQL scripts. ``migrate`` applies the ones not yet recorded in
``schema_versions``, each inside its own transaction, so a crash never leaves a
half-applied step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kairox_core.store.connection import transaction


def migrate(conn: Any, component: str, steps: Sequence[str]) -> int:
    """Bring ``component``'s schema up to ``len(steps)``; returns the version now in force."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions ("
        " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )
    with transaction(conn):
        row = conn.execute(
            "SELECT version FROM schema_versions WHERE component = ?", (component,)
        ).fetchone()
        current = row[0] if row else 0
        if current > len(steps):
            raise RuntimeError(
                f"database schema for {component} is version {current}, newer than this "
                f"Kairox ({len(steps)}); upgrade kairox-core"
            )
        for version in range(current + 1, len(steps) + 1):
            for statement in _split(steps[version - 1]):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_versions(component, version) VALUES (?, ?) "
                "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                (component, version),
            )
    return len(steps)


def _split(script: str) -> list[str]:
    """Split a script into statements; a ``;`` inside a trigger body does not end one."""
    import sqlean

    statements, start = [], 0
    for i, ch in enumerate(script):
        if ch == ";" and sqlean.complete_statement(script[start : i + 1]):
            statement = script[start : i + 1].strip()
            if statement != ";":
                statements.append(statement)
            start = i + 1
    if script[start:].strip():
        statements.append(script[start:].strip())
    return statements
