"""The built-in ``openai`` provider against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from kairox_core.config import ProviderConfig, parse_config
from kairox_core.errors import ConfigError, KairoxUserError
from kairox_core.providers import (
    ChatChunk,
    ModelProvider,
    ProviderError,
    TokenUsage,
    ToolCall,
    ToolCallingProvider,
)
from kairox_core.providers.base import ProviderSetupError
from kairox_core.providers.openai_compat import OpenAICompatProvider
from kairox_core.providers.resolve import provider_for
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.testing.fake_openai import Action, FakeOpenAIServer, count_prompt, serve
from kairox_core.testing.provider_contract import ModelProviderContract

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
REPLY = "Hello there, this is a streamed reply."


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    yield from serve(reply=REPLY)


def make(server: FakeOpenAIServer, **options: Any) -> OpenAICompatProvider:
    options.setdefault("base_url", server.base_url)
    options.setdefault("model", "fake-model")
    options.setdefault("retry_backoff", 0.0)
    return OpenAICompatProvider.from_config(ProviderConfig(id="t", kind="openai", **options))


async def drain(provider: ModelProvider, **kw: Any) -> list[ChatChunk]:
    return [c async for c in provider.stream(MESSAGES, **kw)]


async def test_streams_text_in_pieces_then_usage(server: FakeOpenAIServer) -> None:
    provider = make(server)
    assert isinstance(provider, ModelProvider)
    chunks = await drain(provider)
    texts = [c.text for c in chunks if c.text]
    assert len(texts) == len(REPLY.split())
    assert "".join(texts) == REPLY
    last = chunks[-1]
    assert last.finish_reason == "stop"
    assert last.usage == TokenUsage(count_prompt(MESSAGES), len(texts))
    body = server.requests[-1].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == MESSAGES
    await provider.close()


async def test_events_split_across_reads(server: FakeOpenAIServer) -> None:
    server.script(Action(stream_fault="fragmented", reply="Ünïcode — split “everywhere” ok"))
    chunks = await drain(make(server))
    assert "".join(c.text for c in chunks) == "Ünïcode — split “everywhere” ok"
    assert chunks[-1].usage is not None and not chunks[-1].usage.estimated


async def test_complete_returns_text_usage_and_model(server: FakeOpenAIServer) -> None:
    provider = make(server)
    result = await provider.complete(MESSAGES, temperature=0.0)
    assert result.text == REPLY
    assert result.model == "fake-model"
    assert result.finish_reason == "stop"
    assert result.usage == TokenUsage(count_prompt(MESSAGES), len(REPLY.split()))
    assert server.requests[-1].body["temperature"] == 0.0
    assert server.requests[-1].body["stream"] is False
    await provider.close()


@pytest.mark.slow
async def test_max_tokens_cuts_the_reply(server: FakeOpenAIServer) -> None:
    provider = make(server, max_tokens_param="max_completion_tokens")
    result = await provider.complete(MESSAGES, max_tokens=2)
    assert result.text == "Hello there, "
    assert result.finish_reason == "length"
    assert server.requests[-1].body["max_completion_tokens"] == 2
    chunks = await drain(make(server, max_tokens=3))
    assert chunks[-1].finish_reason == "length"
    assert server.requests[-1].body["max_tokens"] == 3


async def test_api_key_from_env_and_extra_headers(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.api_key = "sk-right"
    monkeypatch.setenv("KX_TEST_KEY", "sk-right")
    monkeypatch.setenv("KX_TEST_ORG", "org-7")
    provider = make(
        server, api_key="$env:KX_TEST_KEY", headers={"X-Org": "$env:KX_TEST_ORG", "X-Plain": "yes"}
    )
    assert (await provider.complete(MESSAGES)).text == REPLY
    headers = {k.lower(): v for k, v in server.requests[-1].headers.items()}
    assert headers["authorization"] == "Bearer sk-right"
    assert headers["x-org"] == "org-7"
    assert headers["x-plain"] == "yes"
    assert "sk-right" not in repr(provider.__dict__)  # the key stays a SecretStr


async def test_rejected_key_is_a_user_error_naming_the_provider(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.api_key = "sk-right"
    monkeypatch.setenv("KX_TEST_KEY", "sk-wrong")
    provider = make(server, api_key="$env:KX_TEST_KEY")
    with pytest.raises(ProviderSetupError) as info:
        await provider.complete(MESSAGES)
    assert isinstance(info.value, KairoxUserError)
    assert info.value.status == 401
    text = str(info.value)
    assert "'t'" in text and "API key" in text and "Incorrect API key" in text
    assert "sk-wrong" not in text
    assert len(server.requests) == 1  # never retried


def test_missing_env_var_is_a_config_error(server: FakeOpenAIServer) -> None:
    with pytest.raises(ConfigError, match="KX_UNSET_VAR"):
        make(server, api_key="$env:KX_UNSET_VAR")


def test_openai_base_url_needs_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAICompatProvider.from_config(ProviderConfig(id="oa", kind="openai", model="gpt-4o"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    provider = OpenAICompatProvider.from_config(
        ProviderConfig(id="oa", kind="openai", model="gpt-4o")
    )
    assert provider.base_url == "https://api.openai.com/v1"


def test_options_are_validated_with_a_suggestion(server: FakeOpenAIServer) -> None:
    with pytest.raises(ConfigError) as info:
        make(server, base_ulr="http://x")
    assert "providers.t.base_ulr" in str(info.value) and "base_url" in str(info.value)
    with pytest.raises(ConfigError, match=r"providers\.t\.timeout"):
        make(server, timeout=-1)
    with pytest.raises(ConfigError, match=r"providers\.t\.model"):
        OpenAICompatProvider.from_config(
            ProviderConfig(id="t", kind="openai", base_url=server.base_url)
        )


async def test_unknown_model_says_not_found(server: FakeOpenAIServer) -> None:
    provider = make(server, model="no-such-model")
    with pytest.raises(ProviderSetupError) as info:
        await drain(provider)
    assert info.value.status == 404
    assert "model 'no-such-model' not found" in str(info.value)


async def test_wrong_path_says_check_base_url(server: FakeOpenAIServer) -> None:
    provider = make(server, base_url=server.base_url.removesuffix("/v1"))
    with pytest.raises(ProviderSetupError, match="does not exist") as info:
        await provider.complete(MESSAGES)
    assert "/v1" in str(info.value)


async def test_unreachable_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatProvider.from_config(
        ProviderConfig(id="down", kind="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    )
    with pytest.raises(ProviderError, match=r"'down'.*cannot reach http://127\.0\.0\.1"):
        await provider.complete(MESSAGES)


async def test_rate_limit_is_retried_then_succeeds(server: FakeOpenAIServer) -> None:
    server.script(Action(status=429, retry_after="0"), Action(status=503))
    result = await make(server, max_retries=2).complete(MESSAGES)
    assert result.text == REPLY
    assert len(server.requests) == 3


async def test_rate_limit_retries_are_bounded(server: FakeOpenAIServer) -> None:
    server.script(*[Action(status=429, message="slow down") for _ in range(5)])
    with pytest.raises(ProviderError) as info:
        await drain(make(server, max_retries=2))
    assert info.value.retryable and info.value.status == 429
    assert "rate limited" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert len(server.requests) == 3


async def test_client_errors_are_not_retried(server: FakeOpenAIServer) -> None:
    server.script(Action(status=400, message="context length exceeded"))
    with pytest.raises(ProviderError, match=r"HTTP 400.*context length exceeded"):
        await make(server).complete(MESSAGES)
    assert len(server.requests) == 1


async def test_server_error_after_retries(server: FakeOpenAIServer) -> None:
    server.script(Action(status=500), Action(status=500))
    with pytest.raises(ProviderError, match=r"server error \(HTTP 500\)"):
        await make(server, max_retries=1).complete(MESSAGES)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("malformed", "malformed response: a stream event is not JSON"),
        ("error_event", "error in the stream: the model crashed"),
        ("no_done", "stream ended before the reply was complete"),
        ("cut", "connection broke mid-reply|stream ended before"),
    ],
)
async def test_broken_streams(server: FakeOpenAIServer, fault: str, expected: str) -> None:
    server.script(Action(stream_fault=fault))
    provider = make(server)
    seen: list[str] = []
    with pytest.raises(ProviderError, match=expected):
        async for chunk in provider.stream(MESSAGES):
            seen.append(chunk.text)
    assert "".join(seen) in REPLY  # what came before the fault was real text
    assert (await provider.complete(MESSAGES)).text == REPLY  # the provider still works


async def test_timeout(server: FakeOpenAIServer) -> None:
    server.script(Action(delay=1.0))
    with pytest.raises(ProviderError, match=r"no answer from .* within 0\.2 s"):
        await make(server, timeout=0.2).complete(MESSAGES)


async def test_without_stream_usage_usage_is_estimated(server: FakeOpenAIServer) -> None:
    chunks = await drain(make(server, stream_usage=False))
    assert "stream_options" not in server.requests[-1].body
    usage = chunks[-1].usage
    assert usage is not None and usage.estimated
    assert usage.completion_tokens > 0 and usage.prompt_tokens > 0


async def test_extra_body_is_sent(server: FakeOpenAIServer) -> None:
    await make(server, extra_body={"seed": 7}).complete(MESSAGES)
    assert server.requests[-1].body["seed"] == 7


@pytest.mark.slow
def test_one_provider_across_event_loops(server: FakeOpenAIServer) -> None:
    """Sync wrappers run each call in a fresh loop; the provider must survive that."""
    provider = make(server)
    for _ in range(2):
        assert asyncio.run(provider.complete(MESSAGES)).text == REPLY


async def test_registered_and_resolved_from_config(
    server: FakeOpenAIServer, kairox_home: object
) -> None:
    config = parse_config(
        {
            "providers": {
                "local": {"kind": "openai", "base_url": server.base_url, "model": "other"}
            },
            "profiles": {"default": {"provider": "local", "model": "fake-model"}},
        }
    )
    provider = provider_for(config)
    assert isinstance(provider, OpenAICompatProvider)
    assert (provider.name, provider.model) == ("local", "fake-model")
    assert (await provider.complete(MESSAGES)).text == REPLY
    await provider.close()


# --- tool calling ----------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALLS = (("get_weather", '{"city": "Zürich"}'), ("get_time", '{"tz": "Europe/Zurich"}'))


async def test_streamed_tool_calls_are_assembled_in_the_last_chunk(
    server: FakeOpenAIServer,
) -> None:
    server.script(Action(tool_calls=CALLS))
    provider = make(server)
    assert isinstance(provider, ToolCallingProvider)
    chunks = [c async for c in provider.stream(MESSAGES, tools=[WEATHER_TOOL], tool_choice="auto")]
    assert all(not c.tool_calls for c in chunks[:-1]) and not "".join(c.text for c in chunks)
    last = chunks[-1]
    assert last.finish_reason == "tool_calls"
    assert last.tool_calls == (
        ToolCall("call_0", "get_weather", '{"city": "Zürich"}'),
        ToolCall("call_1", "get_time", '{"tz": "Europe/Zurich"}'),
    )
    body = server.requests[-1].body
    assert body["tools"] == [WEATHER_TOOL] and body["tool_choice"] == "auto"
    await provider.close()


async def test_complete_returns_tool_calls_and_results_go_back(server: FakeOpenAIServer) -> None:
    server.script(Action(tool_calls=CALLS[:1]))
    provider = make(server)
    result = await provider.complete(MESSAGES, tools=[WEATHER_TOOL])
    assert result.finish_reason == "tool_calls" and result.text == ""
    assert result.tool_calls == (ToolCall("call_0", "get_weather", '{"city": "Zürich"}'),)
    call = result.tool_calls[0]
    follow_up = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call.as_message_part()]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 °C"},
    ]
    answer = await provider.complete(follow_up, tools=[WEATHER_TOOL])
    assert answer.text == REPLY and answer.tool_calls == ()
    assert server.requests[-1].body["messages"] == follow_up
    await provider.close()


async def test_no_tools_sends_no_tools_key(server: FakeOpenAIServer) -> None:
    await make(server).complete(MESSAGES, tool_choice="auto")
    assert "tools" not in server.requests[-1].body
    assert "tool_choice" not in server.requests[-1].body


class TestOpenAICompatibleProviderContract(ModelProviderContract):
    """The ``openai`` provider against the fake OpenAI-compatible server."""

    @pytest.fixture(autouse=True)
    def _fake_server(self) -> Iterator[None]:
        for fake in serve(reply=""):
            self.fake = fake
            yield

    def make_provider(self, reply: str) -> OpenAICompatProvider:
        self.fake.script(Action(reply=reply))
        return make(self.fake)

    def make_failing_provider(self) -> OpenAICompatProvider:
        self.fake.script(Action(status=500, message="the model crashed"))
        return make(self.fake, max_retries=0)


class TestScriptedProviderContract(ModelProviderContract):
    reports_usage = False  # counted with the o200k tokenizer, marked estimated

    def make_provider(self, reply: str) -> ScriptedProvider:
        return ScriptedProvider([reply])
