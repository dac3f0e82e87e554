"""Contract tests for model providers: subclass ``ModelProviderContract``.

A subclass supplies ``make_provider(reply)``: a provider whose backend answers every
call with ``reply`` (a scripted provider, or the real provider pointed at
``FakeOpenAIServer``). Every provider then streams the same way (text pieces, then one
chunk with the finish reason and the usage), completes with the streamed text, honours
``max_tokens``, closes twice, and reports a failing backend as a ``ProviderError``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kairox_core.capabilities import verify
from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    Message,
    ModelProvider,
    ProviderError,
    TokenUsage,
)

CONTRACT_REPLY = "The tide turns twice a day, pulled by the moon and, less, the sun."
CONTRACT_MESSAGES: list[Message] = [
    {"role": "system", "content": "You answer in one sentence."},
    {"role": "user", "content": "Why are there tides?"},
]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


class ModelProviderContract:
    """Subclass and implement ``make_provider``; ``make_failing_provider`` is optional."""

    #: whether the backend reports usage itself (False: estimated, ``usage.estimated``)
    reports_usage: bool = True

    # --- what a subclass provides --------------------------------------------------

    def make_provider(self, reply: str) -> ModelProvider:
        raise NotImplementedError

    def make_failing_provider(self) -> ModelProvider | None:
        """A provider whose backend fails every call (an HTTP 500, say); None to skip."""
        return None

    # --- helpers -------------------------------------------------------------------

    def _stream(self, provider: ModelProvider, **kw: Any) -> list[ChatChunk]:
        async def go() -> list[ChatChunk]:
            try:
                return [c async for c in provider.stream(CONTRACT_MESSAGES, **kw)]
            finally:
                await provider.close()

        return list(_run(go()))

    def _complete(self, provider: ModelProvider, **kw: Any) -> ChatResult:
        async def go() -> ChatResult:
            try:
                return await provider.complete(CONTRACT_MESSAGES, **kw)
            finally:
                await provider.close()

        result = _run(go())
        assert isinstance(result, ChatResult)
        return result

    # --- the contract --------------------------------------------------------------

    def test_is_a_model_provider_with_a_name_and_model(self) -> None:
        provider = self.make_provider(CONTRACT_REPLY)
        assert isinstance(provider, ModelProvider)
        assert isinstance(provider.name, str) and provider.name
        assert isinstance(provider.model, str) and provider.model
        _run(provider.close())

    def test_declared_capabilities_hold(self) -> None:
        """What the provider declares (``ProviderCapabilities``: ``tools`` only when
        ``stream`` and ``complete`` take ``tools=``), it implements."""
        provider = self.make_provider(CONTRACT_REPLY)
        try:
            verify(provider, f"model provider '{provider.name}'")
        finally:
            _run(provider.close())

    def test_stream_gives_the_reply_in_pieces_then_finish_and_usage(self) -> None:
        chunks = self._stream(self.make_provider(CONTRACT_REPLY))
        assert all(isinstance(c, ChatChunk) for c in chunks)
        assert "".join(c.text for c in chunks) == CONTRACT_REPLY
        assert len([c for c in chunks if c.text]) > 1, "streamed as one piece"
        last = chunks[-1]
        assert last.finish_reason == "stop"
        assert isinstance(last.usage, TokenUsage)
        assert last.usage.prompt_tokens > 0 and last.usage.completion_tokens > 0
        assert last.usage.estimated is not self.reports_usage
        assert all(c.finish_reason is None for c in chunks[:-1])

    def test_complete_returns_what_the_stream_would(self) -> None:
        result = self._complete(self.make_provider(CONTRACT_REPLY))
        assert result.text == CONTRACT_REPLY
        assert result.finish_reason == "stop"
        assert result.usage.completion_tokens > 0
        assert isinstance(result.model, str) and result.model
        assert result.tool_calls == ()

    def test_an_empty_reply_is_an_empty_text_not_an_error(self) -> None:
        result = self._complete(self.make_provider(""))
        assert result.text == ""

    def test_max_tokens_cuts_the_reply(self) -> None:
        result = self._complete(self.make_provider(CONTRACT_REPLY), max_tokens=3)
        assert result.finish_reason == "length"
        assert result.text and CONTRACT_REPLY.startswith(result.text)
        assert result.text != CONTRACT_REPLY
        assert result.usage.completion_tokens <= 3

    def test_close_twice_is_harmless(self) -> None:
        provider = self.make_provider(CONTRACT_REPLY)
        self._complete(provider)
        _run(provider.close())

    def test_a_failing_backend_is_a_provider_error_naming_the_provider(self) -> None:
        provider = self.make_failing_provider()
        if provider is None:
            pytest.skip("no backend that can fail")
        with pytest.raises(ProviderError) as info:
            self._complete(provider)
        assert info.value.provider == provider.name
        assert provider.name in str(info.value)
