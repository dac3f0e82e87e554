"""The ``scripted`` provider: replies given in advance, streamed in small pieces.

For tests, demos and offline scripts that need a model with an exact, known output (a
reply that carries a ``<memory>`` tag, say) without a network or a model file.
``[providers.demo] kind = "scripted"``, ``replies = ["first", "second"]`` (cycled),
``chunk_chars = 4``. Usage is counted with the o200k tokenizer and marked estimated.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field

from kairox_core.capabilities import ProviderCapabilities
from kairox_core.config import ProviderConfig
from kairox_core.providers.base import ChatChunk, ChatResult, Message, TokenUsage, collect
from kairox_core.providers.options import parse_options

ReplyFn = Callable[[Sequence[Message]], str]


class ScriptedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    replies: list[str] = Field(default_factory=lambda: ["OK."], min_length=1)
    chunk_chars: int = Field(4, gt=0)


KEEP_CALLS = 32  # recent calls kept in ``calls``: a long-running demo server stays flat


class ScriptedProvider:
    """Answers each call with the next reply (or ``reply_fn(messages)``). ``calls`` holds
    the messages of the last ``KEEP_CALLS`` calls, oldest first (for tests)."""

    capabilities = ProviderCapabilities()

    def __init__(
        self,
        replies: Sequence[str] | ReplyFn = ("OK.",),
        *,
        name: str = "scripted",
        model: str = "scripted",
        chunk_chars: int = 4,
    ) -> None:
        self.name = name
        self.model = model
        self.chunk_chars = chunk_chars
        self.calls: list[list[Message]] = []
        self._fn: ReplyFn | None = replies if callable(replies) else None
        self._cycle: Iterator[str] = itertools.cycle(
            list(replies) if not callable(replies) else [""]
        )

    @classmethod
    def from_config(
        cls, config: ProviderConfig, options: ScriptedOptions | None = None
    ) -> ScriptedProvider:
        options = options or parse_options(config, ScriptedOptions)
        return cls(
            options.replies,
            name=config.id or config.kind,
            model=config.model or "scripted",
            chunk_chars=options.chunk_chars,
        )

    def _next(self, messages: Sequence[Message]) -> str:
        self.calls.append([dict(m) for m in messages])
        if len(self.calls) > KEEP_CALLS:
            del self.calls[0]
        return self._fn(messages) if self._fn is not None else next(self._cycle)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[ChatChunk]:
        from kairox_core.tokens import TokenCounter, get_encoding

        text = self._next(messages)
        counter = TokenCounter()
        finish = "stop"
        if max_tokens is not None and counter.count(text) > max_tokens:
            encoding = get_encoding(counter.encoding_name)
            text = encoding.decode(encoding.encode(text, disallowed_special=())[:max_tokens])
            finish = "length"
        for i in range(0, len(text), self.chunk_chars):
            await asyncio.sleep(0)  # a real await point, as a network stream has
            yield ChatChunk(text=text[i : i + self.chunk_chars])
        usage = TokenUsage(counter.count_messages(messages), counter.count(text), estimated=True)
        yield ChatChunk(usage=usage, finish_reason=finish)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        return await collect(self.stream(messages, max_tokens=max_tokens), model=self.model)

    async def close(self) -> None:
        return None


def create(config: ProviderConfig, *, options: ScriptedOptions | None = None) -> ScriptedProvider:
    return ScriptedProvider.from_config(config, options)
