"""The shared retriever contract, run against a real Tantivy index."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers import build, kb_config

from kairox_core.retrieval.base import RetrievalHit
from kairox_core.testing.contracts import CONTRACT_DOCS, ContractDoc, RetrieverContract
from kairox_tantivy.retriever import TantivyRetriever


class SlowTantivyRetriever(TantivyRetriever):
    """A real index whose searches are held up, as a huge index on a busy disk would be."""

    def _search(self, text: str, k: int, filters: Mapping[str, Any] | None) -> list[RetrievalHit]:
        time.sleep(1.0)
        return super()._search(text, k, filters)


class TestTantivyContract(RetrieverContract):
    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> TantivyRetriever:
        return build(docs, tmp_path / f"kb-{len(docs)}-{time.monotonic_ns()}")

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> TantivyRetriever:
        path = tmp_path / "slow"
        build(CONTRACT_DOCS, path)
        return SlowTantivyRetriever(kb_config(path=str(path / "index"), timeout=timeout))
