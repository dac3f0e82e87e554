"""The workspace index's modules: one seam each, the old import path kept, no circle.

``kairox_core.retrieval.index`` was one 1,076-line module (DDL, document types, the
index, search, filters and the retriever adapter) in an import circle with
``kairox_core.store.protocol``. Type-only imports count here: a circle through
``TYPE_CHECKING`` still ties the modules together for a reader and for mypy.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kairox_core
from kairox_core.retrieval import documents, index, index_schema, index_search

PACKAGE = Path(kairox_core.__file__).resolve().parent
SEAMS = {
    "kairox_core.retrieval.index_schema": PACKAGE / "retrieval" / "index_schema.py",
    "kairox_core.retrieval.documents": PACKAGE / "retrieval" / "documents.py",
    "kairox_core.retrieval.index_search": PACKAGE / "retrieval" / "index_search.py",
    "kairox_core.retrieval.index": PACKAGE / "retrieval" / "index.py",
    "kairox_core.store.protocol": PACKAGE / "store" / "protocol.py",
}


def _imports(path: Path) -> set[str]:
    """Every kairox_core module ``path`` imports, type-only and function-local included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kairox_core"):
            found.add(str(node.module))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kairox_core"))
    return found


def test_the_old_import_path_keeps_every_name_callers_use() -> None:
    for name in (
        "COMPONENT",
        "MIGRATIONS",
        "MODES",
        "DocumentInfo",
        "DocumentInput",
        "IndexBackendMismatch",
        "WorkspaceIndexRetriever",
        "WorkspaceRagIndex",
        "file_document",
        "pack_vector",
    ):
        assert name in index.__all__, name
    assert index.DocumentInput is documents.DocumentInput
    assert index.MIGRATIONS is index_schema.MIGRATIONS
    assert index.WorkspaceIndexRetriever is index_search.WorkspaceIndexRetriever
    assert issubclass(index.WorkspaceRagIndex, index_search.IndexSearch)


def test_the_index_modules_and_the_storage_protocol_form_no_circle() -> None:
    graph = {name: _imports(path) & set(SEAMS) for name, path in SEAMS.items()}

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt}))
            for nxt in graph[start]
        )

    circles = [name for name in SEAMS if reaches(name, name)]
    assert circles == [], f"import circle through {circles}: {graph}"
    assert "kairox_core.store.protocol" not in {
        m for name in SEAMS if name != "kairox_core.store.protocol" for m in graph[name]
    }


def test_schema_and_documents_do_not_need_the_index() -> None:
    """A copy into a SQLite file creates the tables from index_schema alone, and a
    backend's own index takes documents without loading the SQLite index."""
    assert not _imports(SEAMS["kairox_core.retrieval.index_schema"]) & {
        "kairox_core.retrieval.index",
        "kairox_core.retrieval.index_search",
    }
    assert _imports(SEAMS["kairox_core.retrieval.documents"]) == {"kairox_core.errors"}
