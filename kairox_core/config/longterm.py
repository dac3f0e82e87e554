"""``[longterm]`` and ``[packs]``: long-term chunks and context packs."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from kairox_core.config.base import Strict


class LongTermSection(Strict):
    """``[longterm]``: long-term chunks recalled by similarity (kairox_core/longterm)."""

    enabled: bool = True
    threshold: float = Field(0.32, ge=-1, le=1)  # cosine; measured in benchmarks/longterm.py
    k: int = Field(4, gt=0)
    share: float = Field(0.1, ge=0, le=1)


class PacksSection(Strict):
    """``[packs]``: context packs always in the prompt; where team/org packs live."""

    dir: str | None = None  # None: ``packs/`` beside the config file (or the database)
    active: tuple[str, ...] = ()  # active in every session
    workspaces: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    profiles: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    def directory(self, config_source: str | None, database: Path) -> Path:
        """The team/org pack directory: ``dir`` (relative to the config file), else
        ``packs/`` beside the config file, else beside the database."""
        base = Path(config_source).parent if config_source else database.parent
        if self.dir:
            path = Path(self.dir).expanduser()
            return path if path.is_absolute() else base / path
        return base / "packs"
