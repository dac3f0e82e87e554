"""Built-in plugin: the ``sqlite_fts`` knowledge-base kind (FTS5 bm25 over a SQLite file)."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import Register, hookimpl


def _factory(kb: Any) -> Any:
    from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever

    return SqliteFtsRetriever.from_config(kb)


@hookimpl
def kairox_register_retrievers(register: Register) -> None:
    register("sqlite_fts", _factory)
