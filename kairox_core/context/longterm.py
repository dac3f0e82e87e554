"""What the long-term layers hand the assembler: active packs and recalled chunks.

Plain data, so the assembler stays pure and knows nothing of the database: the
long-term engine (kairox_core/longterm/engine.py) searches and decides, the assembler
fits and traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PackItem:
    """An active context pack: mandatory, verbatim."""

    name: str
    level: str
    text: str


@dataclass(frozen=True)
class LongTermItem:
    """A long-term chunk found for the prompt, with its cosine similarity."""

    id: str
    scope: str
    text: str
    similarity: float


@dataclass(frozen=True)
class LongTermRecall:
    """The chunks to offer (above the threshold, at most k, best first) and the near
    misses with the reason each was left out (below the threshold, over k)."""

    chunks: Sequence[LongTermItem] = ()
    left_out: Sequence[tuple[LongTermItem, str]] = ()
    notes: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class LongTermContext:
    """Everything the long-term engine adds to one assembly."""

    packs: Sequence[PackItem] = ()
    recall: LongTermRecall = field(default_factory=LongTermRecall)
    pack_notes: Sequence[str] = ()
