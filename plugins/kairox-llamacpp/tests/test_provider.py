"""The llamacpp provider against a real llama.cpp server (xllamacpp) and the smallest model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import kairox_llamacpp.provider as provider_module
from kairox_core.config import ProviderConfig, parse_config
from kairox_core.errors import ConfigError, KairoxUserError
from kairox_core.plugins import get_plugins
from kairox_core.providers import ModelProvider, ProviderError
from kairox_core.providers.base import ProviderSetupError, collect
from kairox_core.providers.resolve import choose_provider, provider_for
from kairox_llamacpp import models
from kairox_llamacpp.models import LocalModel
from kairox_llamacpp.provider import LlamaCppProvider, running_servers

MESSAGES = [{"role": "user", "content": "hello"}]


def make(model: str | None, **options: Any) -> LlamaCppProvider:
    options.setdefault("n_ctx", 512)  # small KV cache: fast to allocate in tests
    return LlamaCppProvider.from_config(
        ProviderConfig(id="local", kind="llamacpp", model=model, **options)
    )


@pytest.fixture
async def provider(smallest: LocalModel) -> Any:
    p = make(smallest.name)
    yield p
    await p.close()


def refuses(base_url: str) -> bool:
    try:
        httpx.get(f"{base_url}/models", timeout=2)
    except httpx.TransportError:
        return True
    return False


async def test_is_the_default_provider(kairox_home: Path) -> None:
    config = parse_config({})
    choice = choose_provider(config)
    assert choice.is_default and choice.config.kind == "llamacpp"
    assert get_plugins().get("model_providers", "llamacpp").distribution == "kairox-llamacpp"
    default = provider_for(config)
    assert isinstance(default, LlamaCppProvider) and isinstance(default, ModelProvider)
    best = models.default_model()
    assert best is not None and (default.name, default.model) == ("llamacpp", best.name)
    assert not default.started and running_servers() == 0  # nothing starts until used


async def test_starts_on_first_use_shares_and_stops_on_close(smallest: LocalModel) -> None:
    first, second = make(smallest.name), make(smallest.name)
    assert running_servers() == 0 and not first.started
    reply = await first.complete(MESSAGES, max_tokens=4, temperature=0.0)
    assert reply.text and first.started and running_servers() == 1
    await second.complete(MESSAGES, max_tokens=4, temperature=0.0)
    assert running_servers() == 1  # same model and settings: one llama.cpp
    base_url = provider_module._servers[first._key].base_url  # type: ignore[index]
    assert base_url.startswith("http://127.0.0.1:")
    await first.close()
    assert running_servers() == 1 and not refuses(base_url)  # still used by `second`
    await second.close()
    assert running_servers() == 0 and refuses(base_url)
    again = await first.complete(MESSAGES, max_tokens=4, temperature=0.0)  # restarts
    assert again.text == reply.text
    await first.close()
    assert running_servers() == 0


async def test_the_server_wants_its_api_key(provider: LlamaCppProvider) -> None:
    await provider.warm_up()
    running = provider_module._servers[provider._key]  # type: ignore[index]
    body = {"messages": MESSAGES, "max_tokens": 2}
    anonymous = httpx.post(f"{running.base_url}/chat/completions", json=body, timeout=30)
    assert anonymous.status_code == 401
    assert os.environ["OMP_WAIT_POLICY"]  # set (PASSIVE unless the caller chose) before import


async def test_streams_text_then_usage_like_complete(provider: LlamaCppProvider) -> None:
    messages = [{"role": "user", "content": "Say hello."}]
    chunks = [c async for c in provider.stream(messages, max_tokens=12, temperature=0.0)]
    texts = [c.text for c in chunks if c.text]
    assert len(texts) >= 2  # streamed piece by piece, not in one block
    last = chunks[-1]
    assert last.usage is not None and not last.usage.estimated
    assert last.usage.prompt_tokens > 5 and 1 <= last.usage.completion_tokens <= 12
    reference = await provider.complete(messages, max_tokens=12, temperature=0.0)
    assert "".join(texts) == reference.text  # temperature 0 and a seed: deterministic
    assert last.usage == reference.usage and last.finish_reason == reference.finish_reason
    other = await provider.complete(
        [{"role": "user", "content": "Count: one, two, three,"}], max_tokens=12, temperature=0.0
    )
    assert other.text.strip() and other.text != reference.text  # it reads the prompt
    assert reference.model == provider.model


async def test_max_tokens_gives_length(provider: LlamaCppProvider) -> None:
    result = await provider.complete(
        [{"role": "user", "content": "Write a long story about a dragon."}],
        max_tokens=3,
        temperature=0.0,
    )
    assert result.finish_reason == "length" and result.usage.completion_tokens == 3
    streamed = await collect(
        provider.stream([{"role": "user", "content": "Write a long story."}], max_tokens=3),
        model=provider.model,
    )
    assert streamed.finish_reason == "length"


async def test_stopping_early_frees_the_server(provider: LlamaCppProvider) -> None:
    async for chunk in provider.stream(MESSAGES, max_tokens=200, temperature=0.0):
        if chunk.text:
            break
    result = await asyncio.wait_for(provider.complete(MESSAGES, max_tokens=4), timeout=60)
    assert result.text


async def test_context_overflow_names_n_ctx(smallest: LocalModel) -> None:
    tiny = make(smallest.name, n_ctx=128)
    long = [{"role": "user", "content": "word " * 300}]
    try:
        with pytest.raises(ProviderError, match="n_ctx") as info:
            await tiny.complete(long, max_tokens=4)
        assert not isinstance(info.value, ProviderSetupError)
        with pytest.raises(ProviderError, match="n_ctx"):
            await collect(tiny.stream(long, max_tokens=4), model="x")
    finally:
        await tiny.close()


def test_missing_model_file_names_path_and_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ProviderSetupError) as info:
        make(None, model_path=str(missing))
    assert isinstance(info.value, KairoxUserError)
    assert str(missing) in str(info.value) and "model_path" in str(info.value)
    with pytest.raises(ProviderSetupError, match=r"nope\.gguf"):
        make(str(missing))  # model = "/path/x.gguf"


async def test_a_file_that_is_not_a_model_is_a_readable_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(2000))
    provider = make(str(bad))
    assert provider.model == "bad" and provider.path == bad
    with pytest.raises(ProviderSetupError, match="cannot load the model"):
        await provider.complete(MESSAGES, max_tokens=2)
    assert running_servers() == 0


async def test_a_model_path_is_served_under_its_name(smallest: LocalModel) -> None:
    path = models.model_file(smallest)
    by_path = make(str(path))
    try:
        assert by_path.path == path and by_path.model == path.stem and by_path.local is None
        assert (await by_path.complete(MESSAGES, max_tokens=2)).model == path.stem
    finally:
        await by_path.close()


async def test_a_hash_mismatch_is_refused_before_llama_cpp_starts(
    smallest: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = LocalModel(
        "forged-model", "forged.gguf", "0" * 64, smallest.size, "Apache-2.0", "test",
        smallest.parts,
    )  # fmt: skip
    monkeypatch.setattr(models, "CATALOG", (forged, *models.CATALOG))
    provider = make("forged-model")
    with pytest.raises(ProviderSetupError, match="refusing the model forged-model"):
        await provider.complete(MESSAGES, max_tokens=2)
    assert running_servers() == 0


def test_unknown_and_uninstalled_models(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProviderSetupError, match="no local model named 'gpt-4o'") as info:
        make("gpt-4o")
    assert models.DEFAULT_MODEL_NAME in str(info.value)
    absent = LocalModel(
        "absent-model", "absent.gguf", "0" * 64, 1, "Apache-2.0", "test",
        (models.Part("kairox-no-such-dist", "1.0", "a.bin"),), extra="absent",
    )  # fmt: skip
    monkeypatch.setattr(models, "CATALOG", (absent,))
    with pytest.raises(ProviderSetupError, match=r"kairox-llamacpp\[absent\]"):
        make("absent-model")
    with pytest.raises(ProviderSetupError, match="no local model is installed"):
        make(None)


def test_xllamacpp_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "xllamacpp" else real(name, *a),
    )
    with pytest.raises(ProviderSetupError, match="pip install xllamacpp"):
        make(None)


def test_unknown_option() -> None:
    with pytest.raises(ConfigError, match="did you mean 'n_ctx'"):
        make(None, n_ctxx=10)


def test_kairox_models_lists_files_hashes_and_profiles(
    kairox_home: Path, smallest: LocalModel, tmp_path: Path
) -> None:
    toml = tmp_path / "kairox.toml"
    small = f'[profiles.small]\nprovider = "llamacpp"\nmodel = "{smallest.name}"\n'
    toml.write_text("[profiles.default]\n\n" + small)
    kairox = Path(sys.executable).parent / "kairox"
    run = subprocess.run(
        [str(kairox), "--config", str(toml), "models"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if x.lstrip("* ").startswith(smallest.name))
    assert "sha256 ok" in line and "small" in line
    default = models.default_model()
    assert default is not None
    default_line = next(x for x in run.stdout.splitlines() if default.name in x)
    assert default_line.startswith("*") and "default" in default_line.split("profiles:")[1]
    as_json = subprocess.run(
        [str(kairox), "--config", str(toml), "models", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = {r["name"]: r for r in json.loads(as_json.stdout)}
    assert set(rows) == {m.name for m in models.CATALOG}
    row = rows[smallest.name]
    assert row["installed"] and row["hash_ok"] is True and "small" in row["profiles"]
    assert row["sha256"] == smallest.sha256 and row["file"]


def test_a_profile_picks_a_local_model_by_name(kairox_home: Path, smallest: LocalModel) -> None:
    config = parse_config(
        {
            "profiles": {
                "default": {},
                "small": {"provider": "llamacpp", "model": smallest.name},
                "typo": {"provider": "llamacpp", "model": "qwen-9000"},
            }
        }
    )
    default = provider_for(config)
    assert isinstance(default, LlamaCppProvider) and default.local is models.default_model()
    small = provider_for(config, profile="small")
    assert isinstance(small, LlamaCppProvider) and small.local is smallest
    with pytest.raises(ProviderSetupError, match="no local model named 'qwen-9000'"):
        provider_for(config, profile="typo")
