"""The ``<memory>`` marker protocol: extraction from whole texts and from streams.

The model writes ``<memory scope="user" key="editor">Prefers vim</memory>`` in its
reply; these are removed from what the user sees and proposed as memories. See
``extract.py`` for the grammar and code-block rules, ``_cleanup.py`` for how removal
keeps the text tidy, ``stream.py`` for the streaming parser.
"""

from __future__ import annotations

from kairox_core.markers._grammar import (
    DEFAULT_MAX_BODY_CHARS,
    DEFUSE,
    KEY_RE,
    MAX_TAGS,
    InvalidMarker,
    InvalidReason,
    MarkerExtraction,
    MemoryMarker,
    MemoryScope,
)
from kairox_core.markers.extract import extract_memory_markers
from kairox_core.markers.stream import MarkerStreamParser
from kairox_core.markers.taint import is_tainted

__all__ = [
    "DEFAULT_MAX_BODY_CHARS",
    "DEFUSE",
    "KEY_RE",
    "MAX_TAGS",
    "InvalidMarker",
    "InvalidReason",
    "MarkerExtraction",
    "MarkerStreamParser",
    "MemoryMarker",
    "MemoryScope",
    "extract_memory_markers",
    "is_tainted",
]
