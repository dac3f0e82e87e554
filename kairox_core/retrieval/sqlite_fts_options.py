"""The ``[knowledge_bases.<id>]`` keys of kind ``sqlite_fts``: the options model the
built-in plugin registers. Its own module, so registering the kind at start-up does not
import the retriever (SQLite, asyncio)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kairox_core.retrieval.files import DEFAULT_MAX_BYTES

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SqliteFtsOptions(BaseModel):
    """The kind's own keys; validated so a typo is named, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    table: str = "documents"
    text_columns: tuple[str, ...] = ("text",)
    id_column: str = "id"
    title_column: str | None = None
    metadata_columns: tuple[str, ...] = ()
    max_file_bytes: int = Field(DEFAULT_MAX_BYTES, gt=0)

    @field_validator("text_columns", "metadata_columns", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("table", "id_column", "title_column", "text_columns", "metadata_columns")
    @classmethod
    def _identifiers(cls, value: Any) -> Any:
        for name in (value,) if isinstance(value, str) or value is None else value:
            if name is not None and not _IDENT.match(name):
                raise ValueError(f"'{name}' is not a plain SQL identifier")
        return value
