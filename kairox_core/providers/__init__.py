"""Model providers: the interface chat and compaction use to call a model."""

from __future__ import annotations

from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    ModelProvider,
    ProviderError,
    TokenUsage,
)

__all__ = ["ChatChunk", "ChatResult", "ModelProvider", "ProviderError", "TokenUsage"]
