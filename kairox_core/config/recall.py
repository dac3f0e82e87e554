"""``[recall]``: every turn of a session indexed, and recalled per prompt
(kairox_core/recall). These keys were ``[compaction] recall*`` before recall became an
engine of its own; the old names still load, with a note (kairox_core/config/model.py)."""

from __future__ import annotations

from pydantic import Field

from kairox_core.config.base import Strict


class RecallSection(Strict):
    """``[recall]``."""

    enabled: bool = True  # index every turn; recall the best the history lacks
    k: int = Field(64, gt=0)  # recalled turns offered per prompt ([retrieval] share caps)
    # reordering recalled turns before they are fitted (kairox_core/recall/rank.py; 0: off)
    content_prior: float = Field(0.0, ge=0)  # turns that say more (content words) first
    content_words: int = Field(20, gt=0)  # content words that count as a full turn
    neighbour_weight: float = Field(0.0, ge=0)  # a turn lifted by its neighbours' score
    speaker_prior: float = Field(0.0, ge=0)  # turns of a speaker the prompt names first
