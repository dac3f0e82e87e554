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
    # Deprecated: [recall] holds these now. Still read (kairox_core/config/model.py moves
    # them to [recall] with a note); never dumped.
    recall: bool | None = Field(None, exclude=True)
    recall_k: int | None = Field(None, gt=0, exclude=True)
    recall_content_prior: float | None = Field(None, ge=0, exclude=True)
    recall_content_words: int | None = Field(None, gt=0, exclude=True)
    recall_neighbour_weight: float | None = Field(None, ge=0, exclude=True)
    recall_speaker_prior: float | None = Field(None, ge=0, exclude=True)


#: the deprecated ``[compaction]`` keys and the ``[recall]`` key each one became
LEGACY_RECALL_KEYS = {
    "recall": "enabled",
    "recall_k": "k",
    "recall_content_prior": "content_prior",
    "recall_content_words": "content_words",
    "recall_neighbour_weight": "neighbour_weight",
    "recall_speaker_prior": "speaker_prior",
}
