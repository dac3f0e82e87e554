"""The ``[knowledge_bases.<id>]`` keys of kind ``tantivy``: the options model the plugin
registers, so the core validates them and reports errors as it does its own."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.plugin_options import knowledge_base_key, validate_options

#: fields a Kairox-built index always has; a stored field may not reuse these names
RESERVED_FIELDS = frozenset({"key", "doc_id", "chunk_id", "path", "title", "body", "meta"})
DEFAULT_EXTENSIONS = (".md", ".markdown", ".txt", ".rst", ".jsonl")


class TantivyOptions(BaseModel):
    """Kind-specific keys. Unknown keys are errors, so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    source_paths: tuple[Path, ...] = ()
    # tuned on SciFact train with the title also at the head of the body (see indexing.py)
    title_boost: float = Field(0.2, gt=0)
    title_in_body: bool = True
    body_boost: float = Field(1.0, gt=0)
    stored_fields: tuple[str, ...] = ()
    tokenizer: str = "en_stem"
    snippet_chars: int = Field(200, ge=0)
    chunk_chars: int = Field(2000, ge=200)
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    max_file_bytes: int = Field(50_000_000, gt=0)
    # for indexes built elsewhere: which fields hold the id, the title and the text
    id_field: str = "key"
    doc_id_field: str = "doc_id"
    title_field: str = "title"
    body_field: str = "body"

    @field_validator("stored_fields")
    @classmethod
    def _no_reserved(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        clash = sorted(set(names) & RESERVED_FIELDS)
        if clash:
            raise ValueError(
                f"{', '.join(clash)} {'is' if len(clash) == 1 else 'are'} built in "
                f"(always stored); list only your own metadata fields"
            )
        return names

    @field_validator("path", "source_paths")
    @classmethod
    def _home(cls, value: Path | tuple[Path, ...]) -> Path | tuple[Path, ...]:
        if isinstance(value, Path):
            return value.expanduser()
        return tuple(p.expanduser() for p in value)

    @field_validator("extensions")
    @classmethod
    def _dotted(cls, exts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(e if e.startswith(".") else f".{e}" for e in (x.lower() for x in exts))


def parse_options(kb: KnowledgeBaseConfig) -> TantivyOptions:
    """Validate ``kb.options`` as the core does for a registered kind (a ``ConfigError``
    naming ``knowledge_bases.<id>.<key>`` and the fix), for a retriever built directly."""
    return validate_options(TantivyOptions, kb.options, key=knowledge_base_key(kb))
