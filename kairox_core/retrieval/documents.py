"""What any workspace index takes in and lists: documents, and the backend mismatch.

Shared by the SQLite index (index.py) and a storage backend's own (kairox-postgres's
``PgWorkspaceIndex``, through ``kairox_core.store.indexing``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox_core.errors import KairoxUserError

_CODE_EXT = {
    ".py",
    ".js",
    ".ts",
    ".tsx",
    ".jsx",
    ".go",
    ".rs",
    ".java",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".rb",
    ".sh",
    ".kt",
    ".swift",
    ".cs",
    ".php",
    ".scala",
    ".sql",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
}
_MARKDOWN_EXT = {".md", ".markdown", ".mdx", ".rst"}
_MARKDOWN_EXT = {".md", ".markdown", ".mdx", ".rst"}


class IndexBackendMismatch(KairoxUserError):
    """The workspace was indexed with another embedding backend or dimension."""


@dataclass(frozen=True)
class DocumentInput:
    """One document to index: a file's text or any string (e.g. a conversation turn).

    ``context``: text that leads up to this one (a conversation's previous turn). Each
    chunk's vector is then the mean of its own embedding and that of context + chunk,
    so a short reply ("Yes, last May!") is found by what it answers, while the chunk's
    own text still dominates. Context is neither shown nor keyword-indexed.
    """

    doc_id: str
    text: str
    doc_type: str = "text"
    path: str = ""
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "text"  # "file" for files: those are removed when gone from disk
    mtime: float | None = None
    size: int | None = None
    context: str = ""


@dataclass(frozen=True)
class DocumentInfo:
    doc_id: str
    doc_type: str
    path: str
    origin: str
    content_hash: str
    chunks: int


def doc_type_for(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in _MARKDOWN_EXT:
        return "markdown"
    if ext in _CODE_EXT:
        return "code"
    return "text"


def file_document(
    path: Path, st: os.stat_result, doc_id: str, metadata: Mapping[str, Any] | None
) -> DocumentInput:
    """A text file as a document (origin ``file``, its mtime and size kept so the next
    ``add_file`` of an unchanged file costs a stat): any index's ``add_file``."""
    return DocumentInput(
        doc_id,
        path.read_bytes().decode("utf-8", errors="replace"),
        doc_type_for(path),
        str(path),
        path.name,
        dict(metadata or {}),
        "file",
        st.st_mtime,
        st.st_size,
    )
