"""Built-in plugin: the ``sqlite_fts`` knowledge-base kind (FTS5 bm25 over a SQLite file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import RetrieverRegistrar, hookimpl
from kairox_core.retrieval.sqlite_fts_options import SqliteFtsOptions

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig
    from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever


def _factory(
    kb: KnowledgeBaseConfig, *, options: SqliteFtsOptions | None = None
) -> SqliteFtsRetriever:
    from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever

    return SqliteFtsRetriever.from_config(kb, options)


@hookimpl
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    register("sqlite_fts", _factory, options=SqliteFtsOptions)
