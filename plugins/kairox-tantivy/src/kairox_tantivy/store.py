"""Opening and creating Tantivy indexes, and reading their schema.

The schema is read from the index's own ``meta.json`` (the Python bindings do not
expose it), so an index built elsewhere can be searched as long as its title/body
fields are named in the config, and every indexed field can be used as a filter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from kairox_core.retrieval.base import RetrieverConfigError, RetrieverError
from kairox_tantivy.options import TantivyOptions

MARKER_FILE = "kairox-tantivy.json"  # written beside meta.json by indexes Kairox builds


@dataclass(frozen=True)
class FieldInfo:
    name: str
    type: str  # tantivy's names: text, i64, u64, f64, bool, date, json_object, ...
    tokenizer: str | None
    indexed: bool
    stored: bool


def read_schema(path: Path) -> dict[str, FieldInfo]:
    """Fields of the index at ``path``, from its meta.json."""
    raw = json.loads((path / "meta.json").read_text("utf-8"))
    fields: dict[str, FieldInfo] = {}
    for entry in raw.get("schema", []):
        options: dict[str, Any] = entry.get("options", {})
        indexing = options.get("indexing")
        if isinstance(indexing, dict):
            indexed, tokenizer = True, indexing.get("tokenizer")
        else:
            indexed, tokenizer = bool(options.get("indexed", False)), None
        fields[entry["name"]] = FieldInfo(
            entry["name"], entry["type"], tokenizer, indexed, bool(options.get("stored"))
        )
    return fields


def build_schema(options: TantivyOptions) -> tantivy.Schema:
    """The schema of a Kairox-built index: text fields for BM25, raw fields for filters."""
    sb = tantivy.SchemaBuilder()
    for raw_field in ("key", "doc_id", "chunk_id", "path"):
        sb.add_text_field(raw_field, stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=True, tokenizer_name=options.tokenizer)
    sb.add_text_field("body", stored=True, tokenizer_name=options.tokenizer)
    sb.add_json_field("meta", stored=True)
    for name in options.stored_fields:
        sb.add_text_field(name, stored=True, tokenizer_name="raw")
    return sb.build()


def open_index(kb_id: str, options: TantivyOptions) -> tantivy.Index:
    """Open the existing index at ``options.path``; clear errors naming the knowledge base."""
    path = options.path
    if not (path / "meta.json").is_file():
        what = "does not exist" if not path.exists() else "holds no Tantivy index (no meta.json)"
        raise RetrieverConfigError(
            kb_id,
            f"the index directory {path} {what}; build it with "
            f"`kairox kb index {kb_id} PATH...` or set source_paths in "
            f"[knowledge_bases.{kb_id}]",
        )
    try:
        index = tantivy.Index.open(str(path))
        fields = read_schema(path)
    except (ValueError, OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise RetrieverConfigError(
            kb_id,
            f"the index at {path} cannot be opened, it looks corrupt ({exc}); delete the "
            f"directory and rebuild it with `kairox kb index {kb_id} PATH...`",
        ) from None
    check_fields(kb_id, options, fields)
    return index


def create_index(kb_id: str, options: TantivyOptions) -> tantivy.Index:
    """Create an empty Kairox index at ``options.path`` (the directory may not hold one)."""
    options.path.mkdir(parents=True, exist_ok=True)
    try:
        index = tantivy.Index(build_schema(options), path=str(options.path), reuse=False)
    except ValueError as exc:
        raise RetrieverError(kb_id, f"cannot create an index at {options.path}: {exc}") from None
    marker = {
        "format": 1,
        "stored_fields": list(options.stored_fields),
        "tokenizer": options.tokenizer,
    }
    (options.path / MARKER_FILE).write_text(json.dumps(marker), "utf-8")
    return index


def check_fields(kb_id: str, options: TantivyOptions, fields: dict[str, FieldInfo]) -> None:
    """The configured title/body/stored fields must exist in the index."""
    for role, name in (("title_field", options.title_field), ("body_field", options.body_field)):
        info = fields.get(name)
        if info is None or info.type != "text" or not info.indexed:
            known = ", ".join(n for n, f in fields.items() if f.type == "text") or "none"
            raise RetrieverConfigError(
                kb_id,
                f"{role} '{name}' is not an indexed text field of the index at {options.path} "
                f"(text fields: {known}); set {role} in [knowledge_bases.{kb_id}]",
            )
    missing = [n for n in options.stored_fields if n not in fields]
    if missing:
        raise RetrieverConfigError(
            kb_id,
            f"stored_fields {', '.join(missing)} are not in the index at {options.path}, which "
            f"was built without them; delete the directory and rebuild it with "
            f"`kairox kb index {kb_id} PATH...`",
        )
