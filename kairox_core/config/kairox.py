"""``[kairox]``: where data lives and what is used by default."""

from __future__ import annotations

from pydantic import field_validator

from kairox_core.config.base import Strict, expand_path, is_database_url


class KairoxSection(Strict):
    """``[kairox]``: where data lives and what is used by default."""

    database: str | None = None
    default_profile: str = "default"
    default_workspace: str = "default"
    system_prompt: str | None = None

    @field_validator("database")
    @classmethod
    def _database_is_a_path(cls, database: str | None) -> str | None:
        if database is not None and not is_database_url(database):
            expand_path(database)  # resolved at use (relative to the file), checked now
        return database
