"""Files -> documents to index.

Text files (markdown, plain text, reStructuredText) are split into chunks at paragraph
boundaries; the title is the first markdown heading or the file name. ``.jsonl`` files
hold one document per line in BEIR's shape (``_id`` or ``id``, ``title``, ``text``,
``metadata``), so a corpus exported from elsewhere indexes as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class IndexDoc:
    """One entry of the index: a whole document or one chunk of a file."""

    doc_id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    chunk_id: str | None = None
    path: str = ""

    @property
    def key(self) -> str:
        return self.chunk_id or self.doc_id


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_PARAGRAPHS = re.compile(r"\n\s*\n")


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Paragraph-aligned chunks of at most ``max_chars`` (a longer paragraph is cut)."""
    chunks: list[str] = []
    current = ""
    for para in (p.strip() for p in _PARAGRAPHS.split(text)):
        if not para:
            continue
        while len(para) > max_chars:
            cut = para.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            if current:
                chunks.append(current)
                current = ""
            chunks.append(para[:cut].strip())
            para = para[cut:].strip()
        if current and len(current) + 2 + len(para) > max_chars:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        chunks.append(current)
    return chunks


def load_text_file(path: Path, max_chars: int) -> list[IndexDoc]:
    text = path.read_text("utf-8")
    match = _HEADING.search(text)
    title = match.group(1) if match else path.stem
    doc_id = str(path)
    return [
        IndexDoc(
            doc_id,
            title,
            chunk,
            {"path": doc_id, "chunk": i},
            chunk_id=f"{doc_id}#{i}",
            path=doc_id,
        )
        for i, chunk in enumerate(chunk_text(text, max_chars))
    ]


def _scalar_metadata(raw: Any) -> dict[str, Any]:
    """Metadata to keep: scalars and lists of scalars (what filters can match)."""
    if not isinstance(raw, dict):
        return {}
    keep: dict[str, Any] = {}
    for key, value in raw.items():
        items = value if isinstance(value, list) else [value]
        if all(isinstance(v, (str, int, float, bool)) for v in items):
            keep[str(key)] = value
    return keep


def iter_jsonl(path: Path) -> Iterator[IndexDoc]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                doc_id = str(record.get("_id", record.get("id", record.get("doc_id"))))
            except (json.JSONDecodeError, AttributeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a JSON object ({exc})") from None
            if doc_id == "None":
                raise ValueError(f"{path}:{lineno}: no '_id' or 'id' key")
            text = record.get("text", record.get("body", record.get("content", "")))
            title = record.get("title") or ""
            if not isinstance(text, str) or not isinstance(title, str):
                raise ValueError(f"{path}:{lineno}: 'title' and 'text' must be strings")
            if not (text or title).strip():
                continue
            yield IndexDoc(
                doc_id,
                title,
                text or title,
                _scalar_metadata(record.get("metadata")),
                path=str(path),
            )


def load_file(path: Path, max_chars: int) -> list[IndexDoc]:
    """The documents of one file; raises ValueError/OSError/UnicodeError when unreadable."""
    if path.suffix.lower() == ".jsonl":
        return list(iter_jsonl(path))
    return load_text_file(path, max_chars)
