"""The built-in ``openai`` provider: OpenAI-compatible chat completions over httpx.

One client for OpenAI, Ollama (``http://localhost:11434/v1``), vLLM and llama.cpp's
server: ``POST {base_url}/chat/completions``, streamed as SSE ``data:`` chunks with
``choices[0].delta.content`` ending in ``data: [DONE]``; usage arrives in a last chunk
with empty ``choices`` when ``stream_options.include_usage`` is set. Every failure
becomes a ``ProviderError`` naming the provider and the cause; rate limits and
overloaded servers are retried a bounded number of times with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from kairox_core.capabilities import ProviderCapabilities
from kairox_core.config import ProviderConfig, resolve_secret
from kairox_core.errors import ConfigError
from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    Message,
    ProviderError,
    ProviderSetupError,
    TokenUsage,
    ToolCall,
)
from kairox_core.providers.options import parse_options
from kairox_core.providers.sse import SseDecoder

OPENAI_BASE_URL = "https://api.openai.com/v1"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class OpenAIOptions(BaseModel):
    """The keys of a ``[providers.<id>]`` section with ``kind = "openai"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = OPENAI_BASE_URL
    api_key: str | None = None  # "$env:NAME" (or a literal); optional for local servers
    timeout: float = Field(60.0, gt=0)  # seconds without a byte from the server
    connect_timeout: float = Field(10.0, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    max_retries: int = Field(3, ge=0, le=10)  # for 429 and 5xx
    retry_backoff: float = Field(0.5, ge=0)  # first wait in seconds, doubled each retry
    max_retry_wait: float = Field(20.0, ge=0)  # cap on one wait, Retry-After included
    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    stream_usage: bool = True  # send stream_options.include_usage (old servers may reject it)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # e.g. {seed = 1}


class OpenAICompatProvider:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    capabilities = ProviderCapabilities(tools=True)

    def __init__(
        self,
        name: str,
        model: str,
        options: OpenAIOptions | None = None,
        *,
        api_key: SecretStr | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.options = options or OpenAIOptions()
        self.base_url = self.options.base_url.rstrip("/")
        self._api_key = api_key
        self._headers = headers or {}
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_config(
        cls, config: ProviderConfig, options: OpenAIOptions | None = None
    ) -> OpenAICompatProvider:
        """Build from a section; ``options`` are its keys already validated (by the core)."""
        options = options or parse_options(config, OpenAIOptions)
        name = config.id or config.kind
        if not config.model:
            raise ConfigError(
                "no model is set for this OpenAI-compatible provider",
                key=f"providers.{name}.model",
                fix='add model = "..." (e.g. "gpt-4o-mini", or an Ollama model such as '
                '"llama3.2") to the section, or set model in the profile',
            )
        api_key = config.secret("api_key")
        if api_key is None and urlparse(options.base_url).hostname == "api.openai.com":
            api_key = resolve_secret("$env:OPENAI_API_KEY", where=f"providers.{name}.api_key")
        headers = {}
        for header, value in options.headers.items():
            secret = resolve_secret(value, where=f"providers.{name}.headers.{header}")
            headers[header] = secret.get_secret_value() if secret else ""
        return cls(name, config.model, options, api_key=api_key, headers=headers)

    # --- public API ----------------------------------------------------------------

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatChunk]:
        """Text deltas as they arrive; the last chunk carries usage, the finish reason
        and the tool calls (their streamed ``arguments`` pieces joined per call)."""
        body = self._body(messages, max_tokens, temperature, stream=True)
        _add_tools(body, tools, tool_choice)
        response = await self._send(body, stream=True)
        calls = _ToolCallAssembler(self._malformed)
        parts: list[str] = []
        usage: TokenUsage | None = None
        finish: str | None = None
        done = False
        try:
            if "json" in response.headers.get("content-type", ""):
                # A server that ignored stream=true and answered in one piece.
                result = self._parse_result(await response.aread())
                parts.append(result.text)
                if result.text:
                    yield ChatChunk(text=result.text)
                usage, finish, done = result.usage, result.finish_reason, True
                calls.done = result.tool_calls
            else:
                decoder = SseDecoder()
                async for piece in self._aiter_text(response):
                    for data in decoder.feed(piece):
                        if done:
                            break
                        if data.strip() == "[DONE]":
                            done = True
                            break
                        text, chunk_finish, chunk_usage = self._parse_chunk(data, calls)
                        finish = chunk_finish or finish
                        usage = chunk_usage or usage
                        if text:
                            parts.append(text)
                            yield ChatChunk(text=text)
                    if done:
                        break
                if not done:
                    for data in decoder.finish():
                        if data.strip() == "[DONE]":
                            done = True
                            break
                        text, chunk_finish, chunk_usage = self._parse_chunk(data, calls)
                        finish, usage = chunk_finish or finish, chunk_usage or usage
                        if text:
                            parts.append(text)
                            yield ChatChunk(text=text)
        finally:
            await response.aclose()
        if not done and finish is None:
            raise ProviderError(
                self.name,
                "the stream ended before the reply was complete (no [DONE])",
                fix=f"check the server at {self.base_url}; it may have crashed or restarted",
                retryable=True,
            )
        yield ChatChunk(
            usage=usage or self._estimate(messages, "".join(parts)),
            finish_reason=finish,
            tool_calls=calls.result(),
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
    ) -> ChatResult:
        body = self._body(messages, max_tokens, temperature, stream=False)
        _add_tools(body, tools, tool_choice)
        response = await self._send(body, stream=False)
        result = self._parse_result(response.content)
        if result.usage.estimated:
            result = ChatResult(
                result.text,
                self._estimate(messages, result.text),
                result.model,
                result.finish_reason,
                result.tool_calls,
            )
        return result

    async def close(self) -> None:
        if self._http is not None and not self._http.is_closed:
            with contextlib.suppress(RuntimeError):  # its event loop is gone: nothing to free
                await self._http.aclose()
        self._http = None

    # --- request -------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[Message],
        max_tokens: int | None,
        temperature: float | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self.options.extra_body,
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "stream": stream,
        }
        limit = max_tokens if max_tokens is not None else self.options.max_tokens
        if limit is not None:
            body[self.options.max_tokens_param] = limit
        temp = temperature if temperature is not None else self.options.temperature
        if temp is not None:
            body["temperature"] = temp
        if stream and self.options.stream_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    def _client(self) -> httpx.AsyncClient:
        # A client belongs to one event loop; sync wrappers run a new loop per call.
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.is_closed or self._loop is not loop:
            headers = {"Accept": "application/json, text/event-stream", **self._headers}
            if self._api_key is not None:
                headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
            timeout = httpx.Timeout(self.options.timeout, connect=self.options.connect_timeout)
            self._http = httpx.AsyncClient(headers=headers, timeout=timeout)
            self._loop = loop
        return self._http

    async def _send(self, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        client = self._client()
        url = f"{self.base_url}/chat/completions"
        attempt = 0
        while True:
            try:
                response = await client.send(
                    client.build_request("POST", url, json=body), stream=stream
                )
            except httpx.TimeoutException:
                raise self._timeout_error() from None
            except httpx.InvalidURL as exc:
                raise ProviderSetupError(
                    self.name,
                    f"invalid base_url {self.base_url!r}: {exc}",
                    fix="set base_url to e.g. http://localhost:11434/v1",
                ) from None
            except httpx.TransportError as exc:
                raise ProviderError(
                    self.name,
                    f"cannot reach {self.base_url} ({type(exc).__name__}: {exc})",
                    fix="start the server or correct base_url in the provider's section",
                ) from None
            if response.status_code < 400:
                return response
            await response.aread()
            await response.aclose()
            error = self._http_error(response, attempts=attempt + 1)
            if not error.retryable or attempt >= self.options.max_retries:
                raise error
            await asyncio.sleep(self._retry_delay(attempt, response))
            attempt += 1

    def _retry_delay(self, attempt: int, response: httpx.Response) -> float:
        wait = self.options.retry_backoff * (2**attempt)
        retry_after = response.headers.get("retry-after")
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own backoff
                wait = max(wait, float(retry_after))
        wait *= 1 + random.random() * 0.1  # jitter, so clients spread out
        return float(min(wait, self.options.max_retry_wait))

    async def _aiter_text(self, response: httpx.Response) -> AsyncIterator[str]:
        try:
            async for piece in response.aiter_text():
                yield piece
        except httpx.TimeoutException:
            raise self._timeout_error() from None
        except httpx.TransportError as exc:
            raise ProviderError(
                self.name,
                f"the connection broke mid-reply ({type(exc).__name__}: {exc})",
                retryable=True,
            ) from None

    # --- responses -----------------------------------------------------------------

    def _timeout_error(self) -> ProviderError:
        return ProviderError(
            self.name,
            f"no answer from {self.base_url} within {self.options.timeout:g} s",
            fix="raise timeout in the provider's section, or check that the server is not "
            "overloaded",
            retryable=True,
        )

    def _http_error(self, response: httpx.Response, *, attempts: int = 1) -> ProviderError:
        status = response.status_code
        detail = _error_detail(response)
        said = f": {detail}" if detail else ""
        if attempts > 1:
            said += f" (gave up after {attempts} attempts)"
        if status in (401, 403):
            return ProviderSetupError(
                self.name,
                f"the server rejected the API key (HTTP {status}){said}",
                fix="check api_key in the provider's section and the environment variable it names",
                status=status,
            )
        if status == 404:
            if "model" in detail.lower():
                return ProviderSetupError(
                    self.name,
                    f"model '{self.model}' not found at {self.base_url} (HTTP 404){said}",
                    fix="set model to one the server serves (Ollama: `ollama pull <model>`)",
                    status=status,
                )
            return ProviderSetupError(
                self.name,
                f"{self.base_url}/chat/completions does not exist (HTTP 404){said}",
                fix="check base_url; OpenAI-compatible servers usually serve it under /v1",
                status=status,
            )
        if status == 429:
            return ProviderError(
                self.name,
                f"rate limited (HTTP 429){said}",
                fix="wait a moment, or lower the request rate",
                status=status,
                retryable=True,
            )
        if status >= 500:
            return ProviderError(
                self.name,
                f"server error (HTTP {status}){said}",
                fix=f"check the server at {self.base_url}",
                status=status,
                retryable=status in RETRY_STATUSES,
            )
        return ProviderError(self.name, f"request rejected (HTTP {status}){said}", status=status)

    def _malformed(self, what: str, data: str) -> ProviderError:
        sample = data if len(data) <= 120 else data[:117] + "..."
        return ProviderError(
            self.name,
            f"malformed response: {what}: {sample!r}",
            fix=f"check that {self.base_url} is an OpenAI-compatible endpoint",
        )

    def _parse_chunk(
        self, data: str, calls: _ToolCallAssembler
    ) -> tuple[str, str | None, TokenUsage | None]:
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            raise self._malformed("a stream event is not JSON", data) from None
        if not isinstance(payload, dict):
            raise self._malformed("a stream event is not an object", data)
        if payload.get("error"):
            raise ProviderError(
                self.name, f"error in the stream: {_message_of(payload)}", retryable=True
            )
        choices = payload.get("choices") or []
        if not isinstance(choices, list):
            raise self._malformed("'choices' is not a list", data)
        text, finish = "", None
        if choices:
            choice = choices[0]
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise self._malformed("a choice has no 'delta' object", data)
            content = delta.get("content")
            if content is not None and not isinstance(content, str):
                raise self._malformed("'delta.content' is not a string", data)
            text = content or ""
            finish = choice.get("finish_reason")
            calls.feed(delta.get("tool_calls"), data)
        return text, finish, _usage(payload.get("usage"))

    def _parse_result(self, raw: bytes) -> ChatResult:
        data = raw.decode("utf-8", "replace")
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            raise self._malformed("the body is not JSON", data) from None
        try:
            choice = payload["choices"][0]
            content = choice["message"].get("content") or ""
            raw_calls = choice["message"].get("tool_calls")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise self._malformed("no choices[0].message", data) from None
        if not isinstance(content, str):
            raise self._malformed("'message.content' is not a string", data)
        calls = _ToolCallAssembler(self._malformed)
        calls.feed(raw_calls, data)
        usage = _usage(payload.get("usage")) or TokenUsage(estimated=True)
        return ChatResult(
            content,
            usage,
            str(payload.get("model") or self.model),
            choice.get("finish_reason"),
            calls.result(),
        )

    def _estimate(self, messages: Sequence[Message], text: str) -> TokenUsage:
        """Usage counted locally (o200k) when the server reported none."""
        from kairox_core.tokens import TokenCounter

        counter = TokenCounter.for_model(self.model)
        return TokenUsage(counter.count_messages(messages), counter.count(text), estimated=True)


def _add_tools(
    body: dict[str, Any],
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
) -> None:
    if tools:
        body["tools"] = [dict(t) for t in tools]
        if tool_choice is not None:
            body["tool_choice"] = tool_choice if isinstance(tool_choice, str) else dict(tool_choice)


class _ToolCallAssembler:
    """Joins the ``tool_calls`` deltas of a stream by their ``index``: the first delta
    of a call has its ``id`` and ``function.name``, later ones more ``arguments`` text.
    A whole (non-streamed) message's ``tool_calls`` feed through the same path."""

    def __init__(self, malformed: Callable[[str, str], ProviderError]) -> None:
        self._malformed = malformed
        self._calls: dict[int, dict[str, str]] = {}
        self.done: tuple[ToolCall, ...] = ()

    def feed(self, deltas: Any, data: str) -> None:
        if deltas is None:
            return
        if not isinstance(deltas, list):
            raise self._malformed("'tool_calls' is not a list", data)
        for position, delta in enumerate(deltas):
            function = delta.get("function") if isinstance(delta, dict) else None
            if not isinstance(function, dict):
                raise self._malformed("a tool call has no 'function' object", data)
            index = delta.get("index", position)
            call = self._calls.setdefault(int(index), {"id": "", "name": "", "arguments": ""})
            call["id"] = str(delta.get("id") or call["id"])
            call["name"] = call["name"] or str(function.get("name") or "")  # sent once
            call["arguments"] += str(function.get("arguments") or "")

    def result(self) -> tuple[ToolCall, ...]:
        built = tuple(
            ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"])
            for i, c in sorted(self._calls.items())
        )
        return self.done + built


def _usage(value: Any) -> TokenUsage | None:
    if not isinstance(value, dict):
        return None
    try:
        return TokenUsage(
            int(value.get("prompt_tokens") or 0), int(value.get("completion_tokens") or 0)
        )
    except (TypeError, ValueError):
        return None


def _message_of(payload: Any) -> str:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    if error:
        return str(error)
    if isinstance(payload, dict) and payload.get("detail"):
        return str(payload["detail"])  # FastAPI-style servers
    return ""


def _error_detail(response: httpx.Response) -> str:
    text = response.text.strip()
    try:
        detail = _message_of(json.loads(text))
    except (json.JSONDecodeError, ValueError):
        detail = text
    detail = " ".join(detail.split())
    return detail if len(detail) <= 300 else detail[:297] + "..."


def create(config: ProviderConfig, *, options: OpenAIOptions | None = None) -> OpenAICompatProvider:
    """The ``openai`` provider factory registered by the built-in plugin."""
    return OpenAICompatProvider.from_config(config, options)
