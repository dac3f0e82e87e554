"""The Kenaz layers: long-term chunks recalled by similarity, and context packs.

``kx.longterm`` (``LongTerm``) keeps chunks a person chose to keep, embedded, in the
Kairox database; ``kx.packs`` (``Packs``) keeps named text that is always injected.
Both store their rows through the storage's ``longterm`` (``LongTermStore``, store.py:
SQLite in sqlite_store.py, PostgreSQL in kairox-postgres).
The built-in ``longterm`` engine (``kairox_core.longterm.engine``, registered by
default_plugins/longterm_engine.py) hands both to the assembler before each turn.
Importing this package
registers its events (``LongTermChunkAdded`` ... ``PackPublished``) by name.
"""

from __future__ import annotations

from kairox_core.longterm import events as events
from kairox_core.longterm.chunks import SCOPES, Chunk, ChunkHit, ChunkNotFoundError
from kairox_core.longterm.events import (
    LongTermChunkAdded,
    LongTermChunkDeleted,
    LongTermChunkEdited,
    PackActivated,
    PackCreated,
    PackDeleted,
    PackEdited,
    PackPromoted,
    PackPublished,
)
from kairox_core.longterm.packs import LEVELS, Pack, PackNotFoundError, Packs
from kairox_core.longterm.service import LongTerm
from kairox_core.longterm.store import LongTermStore, PackRow

__all__ = [
    "LEVELS",
    "SCOPES",
    "Chunk",
    "ChunkHit",
    "ChunkNotFoundError",
    "LongTerm",
    "LongTermChunkAdded",
    "LongTermChunkDeleted",
    "LongTermChunkEdited",
    "LongTermStore",
    "Pack",
    "PackActivated",
    "PackCreated",
    "PackDeleted",
    "PackEdited",
    "PackNotFoundError",
    "PackPromoted",
    "PackPublished",
    "PackRow",
    "Packs",
]
