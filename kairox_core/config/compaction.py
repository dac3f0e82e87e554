"""``[compaction]``: when and how old history is summarised."""

from __future__ import annotations

from pydantic import Field

from kairox_core.config.base import Strict


class CompactionSection(Strict):
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
