"""The dialects the SQL stores are written over (kairox_core/store/sql/dialect.py).

PostgreSQL's spelling is checked on a real server by the plugin's contract suite; here:
the parameter translation (a literal ``%`` must survive psycopg's format-style
parameters), and the SQLite spelling run on SQLite.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kairox_core.store.connection import connect
from kairox_core.store.sql import POSTGRES, SQLITE


@given(st.text(alphabet=st.sampled_from("ab ?%s'(),=\n"), max_size=40))
def test_postgres_marks_format_back_to_the_text(text: str) -> None:
    values = tuple(f"<{i}>" for i in range(text.count("?")))
    translated = POSTGRES.sql(text)
    assert translated % values == _fill(text, values)  # psycopg's own substitution rule
    assert SQLITE.sql(text) is text


def _fill(text: str, values: tuple[str, ...]) -> str:
    parts = text.split("?")
    return parts[0] + "".join(v + p for v, p in zip(values, parts[1:], strict=True))


def test_json_text_reads_a_nested_key_on_sqlite() -> None:
    conn = connect(":memory:", vec=False)
    data = json.dumps({"payload": {"turn_id": "t-1", "tokens": 7}})
    sql = f"SELECT {SQLITE.json_text('?', 'payload', 'turn_id')}, "
    sql += f"{SQLITE.json_text('?', 'payload', 'missing')}"
    assert tuple(conn.execute(sql, (data, data)).fetchone()) == ("t-1", None)
    assert POSTGRES.json_text("data", "payload", "turn_id") == "data -> 'payload' ->> 'turn_id'"


def test_tables_are_renamed_only_where_the_dialect_says() -> None:
    assert SQLITE.table("leases") == "leases"
    assert POSTGRES.table("leases") == "kairox_leases"
    assert POSTGRES.table("memories") == "memories"
    insert = POSTGRES.insert_ignore("leases", "name, holder", "name")
    assert insert == (
        "INSERT INTO kairox_leases (name, holder) VALUES (%s, %s) "
        "ON CONFLICT (name) DO NOTHING RETURNING 1"
    )
