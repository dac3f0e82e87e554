"""Building test indexes from the contract corpus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.testing.contracts import ContractDoc
from kairox_tantivy.loader import IndexDoc
from kairox_tantivy.retriever import TantivyRetriever


def kb_config(kb_id: str = "notes", **options: Any) -> KnowledgeBaseConfig:
    return KnowledgeBaseConfig.model_validate({"id": kb_id, "kind": "tantivy", **options})


def build(
    docs: Sequence[ContractDoc], tmp_path: Path, kb_id: str = "notes", **options: Any
) -> TantivyRetriever:
    """An index in ``tmp_path/index`` holding ``docs``, ``category`` stored for filters."""
    options.setdefault("path", str(tmp_path / "index"))
    options.setdefault("stored_fields", ["category"])
    retriever = TantivyRetriever(kb_config(kb_id, **options))
    retriever.add_documents(IndexDoc(d.id, d.title, d.text, dict(d.metadata)) for d in docs)
    return retriever
