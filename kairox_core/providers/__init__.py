"""Model providers: the interface chat and compaction use to call a model.

``provider_for(config, provider_id=None, profile=None)`` picks and builds one (see
``resolve``); ``openai`` (any OpenAI-compatible endpoint) and ``scripted`` are built in,
``llamacpp`` comes from the kairox-llamacpp plugin.
"""

from __future__ import annotations

from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    Message,
    ModelProvider,
    ProviderError,
    ProviderSetupError,
    TokenUsage,
    ToolCall,
    ToolCallingProvider,
    collect,
)
from kairox_core.providers.resolve import (
    NoProviderError,
    ProviderChoice,
    build_provider,
    choose_provider,
    provider_for,
)

__all__ = [
    "ChatChunk",
    "ChatResult",
    "Message",
    "ModelProvider",
    "NoProviderError",
    "ProviderChoice",
    "ProviderError",
    "ProviderSetupError",
    "TokenUsage",
    "ToolCall",
    "ToolCallingProvider",
    "build_provider",
    "choose_provider",
    "collect",
    "provider_for",
]
