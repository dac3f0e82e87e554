"""The whole configuration: every section, cross-section checks and lookups."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from kairox_core.config.base import (
    ENV_PREFIX,
    MAX_NESTING,
    Strict,
    default_database_path,
    is_database_url,
    key_error,
    resolve_database_setting,
    resolve_path_setting,
)
from kairox_core.config.compaction import LEGACY_RECALL_KEYS, CompactionSection
from kairox_core.config.kairox import KairoxSection
from kairox_core.config.longterm import LongTermSection, PacksSection
from kairox_core.config.memory import MemorySection
from kairox_core.config.profiles import ProfileConfig
from kairox_core.config.recall import RecallSection
from kairox_core.config.retrieval import RetrievalSection
from kairox_core.config.sources import KnowledgeBaseConfig, ProviderConfig
from kairox_core.config.tools import McpServerConfig, ToolsSection
from kairox_core.errors import ConfigError
from kairox_core.validation import is_secret_key


def too_deep_at(data: Any) -> str | None:
    """The key holding the first value nested deeper than ``MAX_NESTING``, or None.
    Iterative: the point is to refuse what recursion would choke on."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(data, 0, ())]
    while stack:
        value, depth, key = stack.pop()
        if depth > MAX_NESTING:
            return ".".join(key)
        if isinstance(value, dict):  # the key path grows through tables, not arrays
            stack.extend((v, depth + 1, (*key, str(k))) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1, key) for v in value)
    return None


class KairoxConfig(Strict):
    """The whole configuration."""

    kairox: KairoxSection = Field(default_factory=KairoxSection)
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {"default": ProfileConfig()})
    knowledge_bases: dict[str, KnowledgeBaseConfig] = Field(default_factory=dict)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    memory: MemorySection = Field(default_factory=MemorySection)
    retrieval: RetrievalSection = Field(default_factory=RetrievalSection)
    compaction: CompactionSection = Field(default_factory=CompactionSection)
    recall: RecallSection = Field(default_factory=RecallSection)
    longterm: LongTermSection = Field(default_factory=LongTermSection)
    packs: PacksSection = Field(default_factory=PacksSection)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    source: str | None = Field(default=None, exclude=True)
    # what loading noticed without refusing (a deprecated key and what to write instead)
    notes: tuple[str, ...] = Field(default=(), exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _fill_ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for section in ("knowledge_bases", "providers", "mcp_servers"):
                entries = data.get(section)
                if isinstance(entries, dict):
                    data[section] = {
                        k: ({**v, "id": k} if isinstance(v, dict) else v)
                        for k, v in entries.items()
                    }
        return data

    @model_validator(mode="before")
    @classmethod
    def _recall_keys_moved(cls, data: Any) -> Any:
        """``[compaction] recall*`` keys (before ``[recall]`` existed) move to ``[recall]``
        with a note naming the new key; a key ``[recall]`` sets itself wins."""
        if not isinstance(data, dict):
            return data
        compaction, recall = data.get("compaction"), data.get("recall", {})
        if isinstance(compaction, CompactionSection):
            compaction = compaction.model_dump(exclude_unset=True, exclude_none=True)
            compaction.update(_legacy_set(data["compaction"]))
        if isinstance(recall, RecallSection):
            recall = recall.model_dump(exclude_unset=True)
        if not isinstance(compaction, dict) or not isinstance(recall, dict):
            return data  # not tables: validation says so
        old = [k for k in LEGACY_RECALL_KEYS if compaction.get(k) is not None]
        if not old:
            return data
        try:  # their bounds, checked under their old names (where the user wrote them)
            CompactionSection.model_validate({k: compaction[k] for k in old})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise key_error(f"compaction.{first['loc'][0]}", first["msg"]) from None
        notes = [
            f"[compaction] {k} is deprecated: write it as [recall] "
            f"{LEGACY_RECALL_KEYS[k]}"
            + (" (ignored: [recall] sets it)" if LEGACY_RECALL_KEYS[k] in recall else "")
            for k in old
        ]
        for note in notes:
            warnings.warn(note, FutureWarning, stacklevel=1)
        moved = {LEGACY_RECALL_KEYS[k]: compaction[k] for k in old}
        return {
            **data,
            "compaction": {k: v for k, v in compaction.items() if k not in LEGACY_RECALL_KEYS},
            "recall": {**moved, **recall},
            "notes": (*data.get("notes", ()), *notes),
        }

    @model_validator(mode="before")
    @classmethod
    def _not_too_deep(cls, data: Any) -> Any:
        where = too_deep_at(data)
        if where is not None:
            raise key_error(
                where,
                f"nested more than {MAX_NESTING} levels deep; "
                f"no Kairox key needs more than a few levels",
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _single_profile_is_default(cls, data: Any) -> Any:
        """With one profile and no ``default_profile``, that profile is the default."""
        if not isinstance(data, dict):
            return data
        profiles, section = data.get("profiles"), data.get("kairox", {})
        if (
            isinstance(profiles, dict)
            and len(profiles) == 1
            and isinstance(section, dict)
            and "default_profile" not in section
        ):
            return {**data, "kairox": {**section, "default_profile": next(iter(profiles))}}
        return data

    @model_validator(mode="after")
    def _check_names(self) -> KairoxConfig:
        if not self.profiles:
            raise ValueError("at least one profile is needed")
        owners: dict[str, str] = {}
        for name, profile in self.profiles.items():
            for label in (name, *profile.aliases):
                if label in owners and owners[label] != name:
                    raise ValueError(
                        f"profile alias '{label}' of profile '{name}' clashes with "
                        f"profile '{owners[label]}'"
                    )
                owners[label] = name
        if self.kairox.default_profile not in owners:
            raise ValueError(
                f"kairox.default_profile '{self.kairox.default_profile}' is not a profile; "
                f"set [kairox] default_profile to one of: {', '.join(sorted(self.profiles))}"
            )
        for kb_id, kb in self.knowledge_bases.items():
            for label in kb.profiles:
                if label not in owners:
                    raise ValueError(
                        f"knowledge_bases.{kb_id}.profiles names '{label}', which is not a "
                        f"profile or alias"
                    )
        for server_id, server in self.mcp_servers.items():
            for label in server.profiles:
                if label not in owners:
                    raise ValueError(
                        f"mcp_servers.{server_id}.profiles names '{label}', which is not a "
                        f"profile or alias"
                    )
        return self

    # --- lookups -----------------------------------------------------------------

    def resolve_profile(self, name: str | None = None) -> tuple[str, ProfileConfig]:
        """(canonical name, profile) for a profile name or alias; None = the default."""
        wanted = name or self.kairox.default_profile
        if wanted in self.profiles:
            return wanted, self.profiles[wanted]
        for pname, profile in self.profiles.items():
            if wanted in profile.aliases:
                return pname, profile
        import difflib

        labels = sorted({*self.profiles, *(a for p in self.profiles.values() for a in p.aliases)})
        close = difflib.get_close_matches(wanted, labels, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(
            f"no profile or alias named '{wanted}'",
            file=self.source,
            key="profiles",
            fix=f"{hint}profiles and aliases: {', '.join(labels)}",
        )

    def knowledge_bases_for(self, profile: str) -> list[KnowledgeBaseConfig]:
        """Enabled knowledge bases the profile (or one of its aliases) sees, in id order."""
        pname, prof = self.resolve_profile(profile)
        labels = {pname, *prof.aliases}
        return [
            kb
            for _, kb in sorted(self.knowledge_bases.items())
            if kb.enabled and (not kb.profiles or labels.intersection(kb.profiles))
        ]

    def mcp_servers_for(self, profile: str) -> list[McpServerConfig]:
        """Enabled MCP servers the profile (or one of its aliases) sees, in id order."""
        pname, prof = self.resolve_profile(profile)
        labels = {pname, *prof.aliases}
        return [
            server
            for _, server in sorted(self.mcp_servers.items())
            if server.enabled and (not server.profiles or labels.intersection(server.profiles))
        ]

    def database_path(self) -> Path | str:
        """The configured database: a path, or a storage URL (``postgresql://...``)."""
        env = os.environ.get("KAIROX_DB")
        if env:
            return resolve_database_setting(env, key="KAIROX_DB")
        if self.kairox.database:
            if is_database_url(self.kairox.database):
                return self.kairox.database
            path = resolve_path_setting(
                self.kairox.database, key="kairox.database", file=self.source
            )
            if not path.is_absolute() and self.source:
                path = Path(self.source).parent / path
            return path
        return default_database_path()

    def redacted(self) -> dict[str, Any]:
        """A JSON-ready dump in which no secret value appears."""
        dumped: dict[str, Any] = _redact(self.model_dump(mode="json"))
        return dumped


def _legacy_set(section: CompactionSection) -> dict[str, Any]:
    """The deprecated recall keys a ``CompactionSection`` built in Python was given."""
    return {k: getattr(section, k) for k in LEGACY_RECALL_KEYS if getattr(section, k) is not None}


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if isinstance(value, str) and is_secret_key(key) and not value.startswith(ENV_PREFIX):
        return "***"
    return value
