"""The model provider interface: streaming and non-streaming chat with token usage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kairox_core.errors import KairoxError

Message = Mapping[str, Any]  # OpenAI chat format: {"role": ..., "content": ...}


@dataclass(frozen=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(frozen=True)
class ChatChunk:
    """One piece of a streamed reply; the last one may carry usage and a finish reason."""

    text: str = ""
    usage: TokenUsage | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class ChatResult:
    text: str
    usage: TokenUsage
    model: str
    finish_reason: str | None = None


@runtime_checkable
class ModelProvider(Protocol):
    """A chat model. ``stream`` yields chunks; ``complete`` returns the whole reply."""

    name: str
    model: str

    def stream(
        self, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[ChatChunk]: ...

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult: ...

    async def close(self) -> None: ...


class ProviderError(KairoxError):
    """A model call failed; the message names the provider and the cause."""

    def __init__(self, provider: str, cause: str) -> None:
        self.provider = provider
        self.cause = cause
        super().__init__(f"model provider '{provider}': {cause}")
