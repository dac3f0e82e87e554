"""Memories: records, scopes, the store protocol and the approval flow."""

from __future__ import annotations

from kairox_core.markers import MemoryScope
from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import (
    MemoryNotFoundError,
    MemoryRecord,
    MemoryVersion,
    Provenance,
    UnknownScopeError,
    parse_scope,
)

__all__ = [
    "MemoryNotFoundError",
    "MemoryRecord",
    "MemoryScope",
    "MemoryStore",
    "MemoryVersion",
    "Provenance",
    "UnknownScopeError",
    "parse_scope",
]
