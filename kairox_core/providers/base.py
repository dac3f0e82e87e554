"""The model provider interface: streaming and non-streaming chat with token usage.

Chat and compaction only ever see this protocol, so any backend (an HTTP endpoint, a
local GGUF model, a scripted fake in tests) is interchangeable. ``stream`` yields text
deltas and ends with one chunk carrying the finish reason and the usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kairox_core.capabilities import ProviderCapabilities
from kairox_core.errors import KairoxError, KairoxUserError

Message = Mapping[str, Any]  # OpenAI chat format: {"role": ..., "content": ...}


@dataclass(frozen=True)
class TokenUsage:
    """Tokens a call used; ``estimated`` when the backend reported none and we counted."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for; ``arguments`` is the model's JSON text, as
    sent (a tool loop parses it and may report invalid JSON back to the model)."""

    id: str
    name: str
    arguments: str

    def as_message_part(self) -> dict[str, Any]:
        """The ``tool_calls`` entry of the assistant message that replays this call."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ChatChunk:
    """One piece of a streamed reply; the last one may carry usage and a finish reason,
    and the tool calls the model made (assembled from their streamed deltas)."""

    text: str = ""
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ChatResult:
    text: str
    usage: TokenUsage
    model: str
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


@runtime_checkable
class ModelProvider(Protocol):
    """A chat model. ``stream`` yields chunks; ``complete`` returns the whole reply.

    ``name`` is the provider id (the ``[providers.<id>]`` section, or the kind when it
    was used without a section); ``model`` is what the backend is asked for.
    """

    name: str
    model: str

    @property
    def capabilities(self) -> ProviderCapabilities:
        """What it supports beyond this protocol (``tools``: a ``ToolCallingProvider``)."""
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[ChatChunk]: ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult: ...

    async def close(self) -> None: ...


@runtime_checkable
class ToolCallingProvider(ModelProvider, Protocol):
    """A provider that can offer tools (OpenAI ``tools`` schema: ``{"type": "function",
    "function": {"name", "description", "parameters"}}``) and report the calls made, in
    the last chunk's ``tool_calls`` (``finish_reason`` "tool_calls"). Tool results go
    back as ``{"role": "tool", "tool_call_id", "content"}`` messages."""

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatChunk]: ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> ChatResult: ...


class ProviderError(KairoxError):
    """A model call failed; the message names the provider, the cause and a fix.

    ``status`` is the HTTP status when there was one; ``retryable`` says whether the
    same call may succeed later (rate limits, overloaded servers).
    """

    def __init__(
        self,
        provider: str,
        cause: str,
        *,
        fix: str | None = None,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        self.provider = provider
        self.cause = cause
        self.fix = fix
        self.status = status
        self.retryable = retryable
        message = f"model provider '{provider}': {cause}"
        if fix:
            message += f"\n  fix: {fix}"
        super().__init__(message)


class ProviderSetupError(ProviderError, KairoxUserError):
    """The provider cannot work as installed or configured (missing model file, missing
    package, rejected API key): the user's to fix, shown without a traceback."""


async def collect(chunks: AsyncIterator[ChatChunk], *, model: str) -> ChatResult:
    """Drain a stream into one ``ChatResult`` (for providers whose ``complete`` streams)."""
    parts: list[str] = []
    usage: TokenUsage | None = None
    finish: str | None = None
    calls: tuple[ToolCall, ...] = ()
    async for chunk in chunks:
        parts.append(chunk.text)
        usage = chunk.usage or usage
        finish = chunk.finish_reason or finish
        calls += chunk.tool_calls
    return ChatResult("".join(parts), usage or TokenUsage(estimated=True), model, finish, calls)
