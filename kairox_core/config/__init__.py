"""kairox.toml -> typed, validated configuration.

Found via ``--config``, ``KAIROX_CONFIG``, ``./kairox.toml``, then the user config
directory; with none of them, an embedded default that works. Secrets are written
as ``$env:NAME`` and resolved only at use, so a dump or an error never shows them.

One module per section (``kairox``, ``profiles``, ``sources``: knowledge bases and
providers, ``memory``, ``retrieval``, ``compaction``, ``recall``, ``longterm``: and
packs, ``tools``: and MCP servers), ``model`` for the whole, ``loader`` to find and
read the file, ``plugin_check`` to check the names and options plugins provide. Import
from ``kairox_core.config``: the modules are an internal layout.
"""

from __future__ import annotations

from kairox_core.config.base import (
    CONFIG_FILENAME,
    ENV_PREFIX,
    MAX_NESTING,
    default_database_path,
    expand_path,
    is_database_url,
    resolve_database_setting,
    resolve_path_setting,
    resolve_secret,
    user_config_path,
)
from kairox_core.config.compaction import CompactionSection
from kairox_core.config.kairox import KairoxSection
from kairox_core.config.loader import find_config_path, load_config, load_config_file, parse_config
from kairox_core.config.longterm import LongTermSection, PacksSection
from kairox_core.config.memory import BUILTIN_MEMORY_STORE, BUILTIN_NAMES, MemorySection
from kairox_core.config.model import KairoxConfig
from kairox_core.config.plugin_check import check_options, check_plugin_names
from kairox_core.config.profiles import ProfileConfig
from kairox_core.config.recall import RecallSection
from kairox_core.config.retrieval import HASHING_BACKEND, MAX_EMBEDDING_DIMENSION, RetrievalSection
from kairox_core.config.sources import KnowledgeBaseConfig, ProviderConfig
from kairox_core.config.tools import McpServerConfig, ToolsSection

__all__ = [
    "BUILTIN_MEMORY_STORE",
    "BUILTIN_NAMES",
    "CONFIG_FILENAME",
    "ENV_PREFIX",
    "HASHING_BACKEND",
    "MAX_EMBEDDING_DIMENSION",
    "MAX_NESTING",
    "CompactionSection",
    "KairoxConfig",
    "KairoxSection",
    "KnowledgeBaseConfig",
    "LongTermSection",
    "McpServerConfig",
    "MemorySection",
    "PacksSection",
    "ProfileConfig",
    "ProviderConfig",
    "RecallSection",
    "RetrievalSection",
    "ToolsSection",
    "check_options",
    "check_plugin_names",
    "default_database_path",
    "expand_path",
    "find_config_path",
    "is_database_url",
    "load_config",
    "load_config_file",
    "parse_config",
    "resolve_database_setting",
    "resolve_path_setting",
    "resolve_secret",
    "user_config_path",
]
