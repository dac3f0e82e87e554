"""kairox.toml -> typed, validated configuration.

Found via ``--config``, ``KAIROX_CONFIG``, ``./kairox.toml``, then the user config
directory; with none of them, an embedded default that works. Secrets are written
as ``$env:NAME`` and resolved only at use, so a dump or an error never shows them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kairox_core.errors import ConfigError
from kairox_core.validation import format_validation_error, is_secret_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_FILENAME = "kairox.toml"
ENV_PREFIX = "$env:"
#: far above any real embedding model (3072 for the largest OpenAI one); a typo such as
#: 10**11 would otherwise allocate vectors until MemoryError
MAX_EMBEDDING_DIMENSION = 65_536
#: tables and arrays inside one another; a real config needs four or five, while pydantic
#: cannot dump a value much deeper than 100 (``kairox config show`` would fail)
MAX_NESTING = 32
# The memory store the core opens itself, on the event store's connection (no plugin).
BUILTIN_MEMORY_STORE = "sqlite"
BUILTIN_NAMES: dict[str, tuple[str, ...]] = {"memory_stores": (BUILTIN_MEMORY_STORE,)}


def user_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kairox")) / CONFIG_FILENAME


def default_database_path() -> Path:
    return Path(platformdirs.user_data_dir("kairox")) / "kairox.db"


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


def expand_path(value: str) -> Path:
    """``value`` with ``~`` expanded; ValueError, in words, for what the OS would refuse
    later with a traceback (a NUL byte, ``~user`` for a user that does not exist)."""
    if "\0" in value:
        raise ValueError("the path contains a NUL byte; write it without one")
    try:
        return Path(value).expanduser()
    except RuntimeError:
        user = value[1:].split("/", 1)[0]
        who = f"no user '{user}' on this machine" if user else "the home directory is unknown"
        raise ValueError(f"cannot expand '~{user}': {who}; write the full path") from None


def is_database_url(value: str | os.PathLike[str]) -> bool:
    """A storage URL (``postgresql://...``), opened by its plugin, rather than a path.
    ``sqlite:///path`` counts as a path: a file that may or may not exist yet."""
    text = os.fspath(value)
    return "://" in text and not text.startswith("sqlite:///")


def resolve_database_setting(value: str, *, key: str, file: str | None = None) -> Path | str:
    """A database given as a path (``~`` expanded) or a storage URL (kept as written:
    a ``$env:NAME`` password in it is resolved by the storage, at connect time)."""
    if is_database_url(value):
        return value
    return resolve_path_setting(value, key=key, file=file)


def resolve_path_setting(value: str, *, key: str, file: str | None = None) -> Path:
    """``expand_path`` for a path given outside a config file (``--db``, ``KAIROX_DB``)."""
    try:
        return expand_path(value)
    except ValueError as exc:
        raise ConfigError(str(exc), file=file, key=key) from None


def _too_deep_at(data: Any) -> str | None:
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


def _key_error(sub: str, message: str) -> PydanticCustomError:
    """An error for ``sub``, a key inside the validated value (an option of a kind, a
    ``backend_options`` entry), so the message names the full key path."""
    return PydanticCustomError("kairox_key", "{message}", {"sub": sub, "message": message})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KairoxSection(_Strict):
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
    # the model takes images: the new prompt's images travel as OpenAI image_url parts
    vision: StrictBool = False

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

    @model_validator(mode="before")
    @classmethod
    def _resolve_path(cls, data: Any, info: ValidationInfo) -> Any:
        """A relative ``path`` option is relative to the config file, like ``database``:
        the same file works from any directory."""
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            return data
        try:
            path = expand_path(data["path"])
        except ValueError as exc:
            raise _key_error("path", str(exc)) from None
        base = (info.context or {}).get("base_dir")
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        return {**data, "path": str(path)}

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

    @model_validator(mode="after")
    def _base_url_is_http(self) -> ProviderConfig:
        """Checked here for every kind, so ``config check`` finds what chat would."""
        url = (self.model_extra or {}).get("base_url")
        if url is None:
            return self
        from urllib.parse import urlsplit

        if not isinstance(url, str):
            raise _key_error("base_url", "must be a string such as 'http://127.0.0.1:8080/v1'")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as exc:
            raise _key_error("base_url", f"not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise _key_error(
                "base_url", "must start with http:// or https://, e.g. 'http://127.0.0.1:8080/v1'"
            )
        if not parts.hostname:
            raise _key_error("base_url", "has no host; e.g. 'http://127.0.0.1:8080/v1'")
        return self

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def secret(self, name: str) -> SecretStr | None:
        return resolve_secret(self.options.get(name), where=f"providers.{self.id}.{name}")


class MemorySection(_Strict):
    """``[memory]``: the memory store backend and the limits of the marker protocol."""

    store: str = BUILTIN_MEMORY_STORE  # or one registered by kairox_register_memory_stores
    max_body_chars: int = Field(2000, gt=0)
    # a reply is untrusted: markers past this many become invalid ("too many proposals")
    max_proposals_per_turn: int = Field(20, ge=0)
    max_memories_tokens_share: float = Field(0.5, gt=0, le=1)
    # the model reads its own past replies with the memory tags it wrote (issue 28). Off
    # by default: with it on, the default 0.5B model tagged questions, wrote bodies
    # without the fact ("Remembering my bike lock code") and answered recall questions
    # with made-up tags; docs/memory.md has the conversation.
    history_tags: bool = False


HASHING_BACKEND = "hashing"  # the built-in embedding backend: no model, no meaning


class RetrievalSection(_Strict):
    """``[retrieval]``: the workspace index and the share of the budget hits may use."""

    workspace_index: bool = True
    backend: str = HASHING_BACKEND
    backend_options: dict[str, Any] = Field(default_factory=dict)
    # 0.5 (was 0.25) and recall_k 64: with the default hashing backend, recall then
    # finds more of the evidence than plain BM25 turn ranking (docs/recall.md, LoCoMo)
    share: float = Field(0.5, ge=0, le=1)
    k: int = Field(8, gt=0)
    timeout: float = Field(10.0, gt=0)
    workspace_weight: float = Field(1.0, gt=0)
    # auto: keyword alone when the backend is "hashing" (its vectors carry no meaning and
    # only add noise to the fusion), hybrid otherwise (see ``search_mode``)
    mode: str = Field("auto", pattern="^(auto|hybrid|vector|keyword)$")
    chunk_tokens: int = Field(512, ge=32)
    chunk_overlap: int = Field(64, ge=0)
    # hybrid search: weighted reciprocal rank fusion of the keyword and vector rankings
    rrf_k: int = Field(60, gt=0)
    keyword_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    hybrid_candidates: int = Field(100, gt=0)
    max_file_bytes: int = Field(2_000_000, gt=0)  # `kairox index` skips larger files

    @property
    def search_mode(self) -> str:
        """The mode searches use: ``mode``, with ``auto`` resolved for the backend."""
        if self.mode != "auto":
            return self.mode
        return "keyword" if self.backend == HASHING_BACKEND else "hybrid"

    @model_validator(mode="before")
    @classmethod
    def _overlap_follows_chunk_tokens(cls, data: Any) -> Any:
        """An unset overlap shrinks with a small ``chunk_tokens`` instead of failing."""
        if isinstance(data, dict) and "chunk_overlap" not in data:
            tokens = data.get("chunk_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 32:
                return {**data, "chunk_overlap": min(64, tokens // 2 - 1)}
        return data

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_half(cls, overlap: int, info: ValidationInfo) -> int:
        tokens = info.data.get("chunk_tokens")
        if tokens is not None and overlap >= tokens // 2:
            raise ValueError(
                f"chunk_overlap ({overlap}) must be below half of chunk_tokens ({tokens}), "
                f"so at most {tokens // 2 - 1}; lower chunk_overlap or raise chunk_tokens"
            )
        return overlap

    @field_validator("backend_options")
    @classmethod
    def _sane_dimension(cls, options: dict[str, Any]) -> dict[str, Any]:
        if "dimension" not in options:
            return options
        dim = options["dimension"]
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise _key_error("dimension", f"must be a whole number (got {dim!r})")
        if not 1 <= dim <= MAX_EMBEDDING_DIMENSION:
            raise _key_error(
                "dimension",
                f"must be between 1 and at most {MAX_EMBEDDING_DIMENSION} (got {dim}); "
                f"embedding models use a few hundred to a few thousand",
            )
        return options


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
    recall_k: int = Field(64, gt=0)  # recalled turns offered per prompt ([retrieval] share caps)
    # reordering recalled turns before they are fitted (compaction/recall_rank.py; 0: off)
    recall_content_prior: float = Field(0.0, ge=0)  # turns that say more (content words) first
    recall_content_words: int = Field(20, gt=0)  # content words that count as a full turn
    recall_neighbour_weight: float = Field(0.0, ge=0)  # a turn lifted by its neighbours' score
    recall_speaker_prior: float = Field(0.0, ge=0)  # turns of a speaker the prompt names first


class LongTermSection(_Strict):
    """``[longterm]``: long-term chunks recalled by similarity (kairox_core/longterm)."""

    enabled: bool = True
    threshold: float = Field(0.32, ge=-1, le=1)  # cosine; measured in benchmarks/longterm.py
    k: int = Field(4, gt=0)
    share: float = Field(0.1, ge=0, le=1)


class PacksSection(_Strict):
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


class ToolsSection(_Strict):
    """``[tools]``: the tool loop of a turn (kairox_core/toolloop.py)."""

    max_rounds: int = Field(8, ge=0)  # model calls that may run tools, per turn
    max_result_chars: int = Field(16_000, gt=0)  # a longer result is cut (it is mandatory)
    timeout: float = Field(30.0, gt=0)  # seconds one tool call may take


class McpServerConfig(_Strict):
    """``[mcp_servers.<id>]``: an MCP server whose tools the model may call; ``command``
    (stdio) or ``url`` (streamable HTTP)."""

    id: str = ""
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    enabled: bool = True
    profiles: tuple[str, ...] = ()  # empty: every profile sees it
    tools: tuple[str, ...] | None = None  # an allow-list of the server's tool names
    timeout: float = Field(30.0, gt=0)  # seconds to start, and for each call

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"mcp_servers.{self.id} needs exactly one of 'command' (a program run over "
                f"stdio) or 'url' (streamable HTTP, e.g. 'http://127.0.0.1:8000/mcp')"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise _key_error("url", "must start with http:// or https://")
        if "__" in self.id:
            raise ValueError(f"mcp_servers.{self.id}: an id may not contain '__' (tool names)")
        return self

    def resolved_env(self) -> dict[str, str]:
        """``env`` with ``$env:NAME`` values read now (at start, never stored)."""
        return _resolve_all(self.env, f"mcp_servers.{self.id}.env")

    def resolved_headers(self) -> dict[str, str]:
        return _resolve_all(self.headers, f"mcp_servers.{self.id}.headers")


def _resolve_all(values: Mapping[str, str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in values.items():
        secret = resolve_secret(value, where=f"{where}.{name}")
        out[name] = secret.get_secret_value() if secret is not None else ""
    return out


class KairoxConfig(_Strict):
    """The whole configuration."""

    kairox: KairoxSection = Field(default_factory=KairoxSection)
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {"default": ProfileConfig()})
    knowledge_bases: dict[str, KnowledgeBaseConfig] = Field(default_factory=dict)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    memory: MemorySection = Field(default_factory=MemorySection)
    retrieval: RetrievalSection = Field(default_factory=RetrievalSection)
    compaction: CompactionSection = Field(default_factory=CompactionSection)
    longterm: LongTermSection = Field(default_factory=LongTermSection)
    packs: PacksSection = Field(default_factory=PacksSection)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    source: str | None = Field(default=None, exclude=True)

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
    def _not_too_deep(cls, data: Any) -> Any:
        where = _too_deep_at(data)
        if where is not None:
            raise _key_error(
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


def _redact(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, key) for v in value]
    if isinstance(value, str) and is_secret_key(key) and not value.startswith(ENV_PREFIX):
        return "***"
    return value


def parse_config(
    data: Mapping[str, Any], *, source: str = "<config>", base_dir: Path | None = None
) -> KairoxConfig:
    """Validate ``data``; relative knowledge-base paths resolve against ``base_dir``."""
    try:
        config = KairoxConfig.model_validate(dict(data), context={"base_dir": base_dir})
    except ValidationError as exc:
        raise format_validation_error(exc, source, model=KairoxConfig) from None
    except RecursionError:
        raise _too_deep(source) from None
    return config.model_copy(update={"source": source})


def _too_deep(source: str, text: str = "") -> ConfigError:
    line, key = _deepest_line(text)
    where = f"line {line}: " if line else ""
    return ConfigError(
        f"{where}nested too deeply: arrays or tables inside one another beyond what can be read",
        file=source,
        key=key,
        fix="flatten the nesting; no Kairox key needs more than a few levels",
    )


def _deepest_line(text: str) -> tuple[int | None, str | None]:
    """Where a document too deep for the TOML reader nests most: its line and, when the
    line is ``key = ...``, the key under the table in force (the reader cannot say)."""
    best, best_line, best_key, table = 0, None, None, ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]") and "=" not in stripped:
            table = stripped.strip("[]").strip()
            continue
        openers = line.count("[") + line.count("{")
        if openers > best:
            best, best_line = openers, number
            name = line.split("=", 1)[0].strip() if "=" in line else ""
            best_key = ".".join(p for p in (table, name) if p) or None
    return best_line, best_key


def load_config_file(path: str | os.PathLike[str]) -> KairoxConfig:
    p = resolve_path_setting(os.fspath(path), key="--config (or KAIROX_CONFIG)")
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
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise _too_deep(str(p), raw.decode("utf-8", "replace")) from None
    return parse_config(data, source=str(p), base_dir=p.absolute().parent)


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
    """Every configured kind, backend, strategy and provider must be provided by a plugin,
    and the options of each must pass the options model its plugin registered."""
    from kairox_core.plugins import get_plugins

    host = get_plugins()
    src = config.source or "<embedded default>"
    checks: list[tuple[str, str, str]] = [
        ("embedding_backends", config.retrieval.backend, "retrieval.backend"),
        ("compaction_strategies", config.compaction.strategy, "compaction.strategy"),
    ]
    if config.memory.store != BUILTIN_MEMORY_STORE:  # built in: it shares the database
        checks.append(("memory_stores", config.memory.store, "memory.store"))
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
        try:
            host.get(category, name, builtin=BUILTIN_NAMES.get(category, ()))
        except Exception as exc:
            raise ConfigError(str(exc), file=src, key=key) from None
    from kairox_core.plugin_options import check_options

    check_options(config, host)
