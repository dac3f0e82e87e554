"""kairox.toml -> typed, validated configuration.

Found via ``--config``, ``KAIROX_CONFIG``, ``./kairox.toml``, then the user config
directory; with none of them, an embedded default that works. Secrets are written
as ``$env:NAME`` and resolved only at use, so a dump or an error never shows them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kairox_core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_FILENAME = "kairox.toml"
ENV_PREFIX = "$env:"
SECRET_WORDS = ("key", "secret", "token", "password", "credential")


def user_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kairox")) / CONFIG_FILENAME


def default_database_path() -> Path:
    return Path(platformdirs.user_data_dir("kairox")) / "kairox.db"


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def resolve_secret(value: Any, *, where: str) -> SecretStr | None:
    """Resolve a ``$env:NAME`` reference (or a literal) into a SecretStr at use time."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError("expected a string", key=where)
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        resolved = os.environ.get(name)
        if resolved is None:
            raise ConfigError(
                f"environment variable {name} is not set",
                key=where,
                fix=f"export {name}=... before running kairox",
            )
        return SecretStr(resolved)
    return SecretStr(value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KairoxSection(_Strict):
    """``[kairox]``: where data lives and what is used by default."""

    database: str | None = None
    default_profile: str = "default"
    default_workspace: str = "default"
    system_prompt: str | None = None


class ProfileConfig(_Strict):
    """``[profiles.<name>]``: one model and its window."""

    model: str = "smollm2-135m-instruct"
    provider: str | None = None  # a [providers.<name>] id; None = the default provider
    context_window: int = Field(8192, gt=0)
    reserve: int = Field(1024, ge=0)  # tokens kept free for the response
    encoding: str | None = None  # None: from the model name, else o200k_base
    token_margin: float = Field(0.10, ge=0, le=1)  # for models whose tokenizer is not OpenAI's
    compaction_trigger: float = Field(0.7, gt=0, le=1)
    instructions: str = ""
    aliases: tuple[str, ...] = ()
    # a reranker registered through kairox_register_rerankers reorders the fused top-N
    # of workspace search and of recall of past turns; None: fused order as it is
    reranker: str | None = None
    reranker_options: dict[str, Any] = Field(default_factory=dict)
    rerank_top_n: int = Field(20, gt=0)

    @field_validator("reserve")
    @classmethod
    def _reserve_below_window(cls, reserve: int, info: ValidationInfo) -> int:
        window = info.data.get("context_window")
        if window is not None and reserve >= window:
            raise ValueError(
                f"reserve ({reserve}) must be smaller than context_window ({window}); "
                f"lower reserve or raise context_window"
            )
        return reserve

    @property
    def budget(self) -> int:
        return self.context_window - self.reserve


class KnowledgeBaseConfig(BaseModel):
    """``[knowledge_bases.<id>]``: common keys; the rest are the kind's own options."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = ""
    kind: str
    enabled: bool = True
    profiles: tuple[str, ...] = ()  # empty: every profile sees it
    weight: float = Field(1.0, gt=0)
    timeout: float = Field(10.0, gt=0)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def secret(self, name: str) -> SecretStr | None:
        return resolve_secret(self.options.get(name), where=f"knowledge_bases.{self.id}.{name}")


class ProviderConfig(BaseModel):
    """``[providers.<name>]``: a model provider; ``kind`` names the registered provider."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = ""
    kind: str
    model: str | None = None

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def secret(self, name: str) -> SecretStr | None:
        return resolve_secret(self.options.get(name), where=f"providers.{self.id}.{name}")


class MemorySection(_Strict):
    """``[memory]``: the memory store backend and the limits of the marker protocol."""

    store: str = "sqlite"  # a memory store registered through kairox_register_memory_stores
    max_body_chars: int = Field(2000, gt=0)
    max_memories_tokens_share: float = Field(0.5, gt=0, le=1)


class RetrievalSection(_Strict):
    """``[retrieval]``: the workspace index and the share of the budget hits may use."""

    workspace_index: bool = True
    backend: str = "hashing"
    backend_options: dict[str, Any] = Field(default_factory=dict)
    share: float = Field(0.25, ge=0, le=1)
    k: int = Field(8, gt=0)
    timeout: float = Field(10.0, gt=0)
    workspace_weight: float = Field(1.0, gt=0)
    mode: str = Field("hybrid", pattern="^(hybrid|vector|keyword)$")
    chunk_tokens: int = Field(512, ge=32)
    chunk_overlap: int = Field(64, ge=0)
    # hybrid search: weighted reciprocal rank fusion of the keyword and vector rankings
    rrf_k: int = Field(60, gt=0)
    keyword_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    hybrid_candidates: int = Field(100, gt=0)
    max_file_bytes: int = Field(2_000_000, gt=0)  # `kairox index` skips larger files


class CompactionSection(_Strict):
    """``[compaction]``."""

    enabled: bool = True
    strategy: str = "extractive"
    provider: str | None = None  # a [providers.<name>] id for the model strategy
    keep_recent_exchanges: int = Field(4, ge=0)
    target_tokens: int = Field(512, gt=0)
    # earlier summaries are folded into the next one once they would pass this share
    summaries_share: float = Field(0.25, gt=0, le=1)
    # a document attachment longer than this is summarised text-side when compacted
    attachment_max_tokens: int = Field(400, gt=0)
    # the model strategy sends at most this much transcript per call (rolling windows)
    max_input_tokens: int = Field(6000, ge=512)
    recall: bool = True  # index every turn; recall the best history lacks (recall.py)
    recall_k: int = Field(32, gt=0)  # recalled turns offered per prompt ([retrieval] share caps)


class KairoxConfig(_Strict):
    """The whole configuration."""

    kairox: KairoxSection = Field(default_factory=KairoxSection)
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {"default": ProfileConfig()})
    knowledge_bases: dict[str, KnowledgeBaseConfig] = Field(default_factory=dict)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    memory: MemorySection = Field(default_factory=MemorySection)
    retrieval: RetrievalSection = Field(default_factory=RetrievalSection)
    compaction: CompactionSection = Field(default_factory=CompactionSection)

    source: str | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _fill_ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for section in ("knowledge_bases", "providers"):
                entries = data.get(section)
                if isinstance(entries, dict):
                    data[section] = {
                        k: ({**v, "id": k} if isinstance(v, dict) else v)
                        for k, v in entries.items()
                    }
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
                f"profiles: {', '.join(sorted(self.profiles))}"
            )
        for kb_id, kb in self.knowledge_bases.items():
            for label in kb.profiles:
                if label not in owners:
                    raise ValueError(
                        f"knowledge_bases.{kb_id}.profiles names '{label}', which is not a "
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

    def database_path(self) -> Path:
        env = os.environ.get("KAIROX_DB")
        if env:
            return Path(env).expanduser()
        if self.kairox.database:
            path = Path(self.kairox.database).expanduser()
            if not path.is_absolute() and self.source:
                path = Path(self.source).parent / path
            return path
        return default_database_path()

    def redacted(self) -> dict[str, Any]:
        """A JSON-ready dump in which no secret value appears."""
        dumped: dict[str, Any] = _redact(self.model_dump(mode="json"))
        return dumped


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if isinstance(value, str) and is_secret_key(key) and not value.startswith(ENV_PREFIX):
        return "***"
    return value


def _key_path(loc: Iterable[Any]) -> str:
    return ".".join(str(p) for p in loc if not str(p).startswith("function-"))


def _format_validation_error(exc: ValidationError, source: str) -> ConfigError:
    lines = []
    first_key = None
    for err in exc.errors():
        key = _key_path(err["loc"])
        first_key = first_key or key
        etype = err["type"]
        if etype == "extra_forbidden":
            msg = f"unknown key '{key}'"
            fix = _suggest(err["loc"])
        elif etype == "missing":
            msg = f"missing required key '{key}'"
            fix = "add it"
        else:
            text = err["msg"].removeprefix("Value error, ")
            msg = f"key '{key}': {text}" if key else text
            fix = None
            if not is_secret_key(key) and "input" in err and etype not in ("value_error",):
                msg += f" (got {err['input']!r})"
        lines.append(msg + (f"  (fix: {fix})" if fix else ""))
    error = ConfigError("\n  ".join(lines), file=source)
    error.key = first_key
    return error


def _suggest(loc: tuple[Any, ...] | Any) -> str:
    import difflib

    parts = [str(p) for p in loc]
    model: Any = KairoxConfig
    for part in parts[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            continue
        ann = field.annotation
        model = getattr(ann, "__args__", (None, ann))[-1] if hasattr(ann, "__args__") else ann
    known = list(getattr(model, "model_fields", {}) or [])
    close = difflib.get_close_matches(parts[-1], known, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"remove it; known keys: {', '.join(k for k in known if k != 'source')}"


def parse_config(data: Mapping[str, Any], *, source: str = "<config>") -> KairoxConfig:
    try:
        config = KairoxConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise _format_validation_error(exc, source) from None
    return config.model_copy(update={"source": source})


def load_config_file(path: str | os.PathLike[str]) -> KairoxConfig:
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            "file not found", file=str(p), fix="check the path given with --config or KAIROX_CONFIG"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(p)) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"not valid TOML: {exc}", file=str(p), fix="check the syntax at the line named"
        ) from None
    return parse_config(data, source=str(p))


def find_config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to use, or None for the embedded default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("KAIROX_CONFIG")
    if env:
        return Path(env)
    for candidate in (Path.cwd() / CONFIG_FILENAME, user_config_path()):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | os.PathLike[str] | None = None) -> KairoxConfig:
    """Find and load the configuration; the embedded default when there is none."""
    path = find_config_path(explicit)
    if path is None:
        return KairoxConfig()
    return load_config_file(path)


def check_plugin_names(config: KairoxConfig) -> None:
    """Every configured kind, backend, strategy and provider must be provided by a plugin."""
    from kairox_core.plugins import get_plugins

    host = get_plugins()
    src = config.source or "<embedded default>"
    checks: list[tuple[str, str, str]] = [
        ("embedding_backends", config.retrieval.backend, "retrieval.backend"),
        ("compaction_strategies", config.compaction.strategy, "compaction.strategy"),
        ("memory_stores", config.memory.store, "memory.store"),
    ]
    checks += [
        ("retrievers", kb.kind, f"knowledge_bases.{kb_id}.kind")
        for kb_id, kb in config.knowledge_bases.items()
    ]
    checks += [
        ("model_providers", p.kind, f"providers.{pid}.kind") for pid, p in config.providers.items()
    ]
    checks += [
        ("rerankers", p.reranker, f"profiles.{name}.reranker")
        for name, p in config.profiles.items()
        if p.reranker
    ]
    for category, name, key in checks:
        if not host.names(category) and category not in ("retrievers", "rerankers"):
            continue  # nothing of this category is registered yet in this build
        try:
            host.get(category, name)
        except Exception as exc:
            raise ConfigError(str(exc), file=src, key=key) from None
