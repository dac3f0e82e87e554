"""``[profiles.x] vision = true``: the new prompt's images reach the model as OpenAI
content parts; older turns, and profiles without vision, carry the placeholder."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core.attachments import from_path
from kairox_core.chat.engine import ChatEngine
from kairox_core.config import ProviderConfig, parse_config
from kairox_core.errors import ConfigError
from kairox_core.providers.openai_compat import create
from kairox_core.testing.fake_openai import FakeOpenAIServer
from kairox_core.tokens import IMAGE_TOKENS, TokenCounter

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(reply="A login form.") as fake:
        yield fake


def engine(tmp_path: Path, model: FakeOpenAIServer, *, vision: bool) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 16384, "reserve": 512, "vision": vision}},
            "retrieval": {"workspace_index": False},
        }
    )
    provider = create(
        ProviderConfig(id="fake", kind="openai", model="fake-model", base_url=model.base_url)
    )
    return ChatEngine.open(config, tmp_path / "k.db", provider=provider)


def user_messages(model: FakeOpenAIServer, request: int) -> list[dict[str, Any]]:
    sent = model.requests[request].body["messages"]
    return [m for m in sent if m["role"] == "user"]


async def run(chat: ChatEngine, prompt: str) -> None:
    outcome = await chat.run_turn(prompt, lambda _text: None)
    assert outcome.error is None


async def test_a_vision_profile_gets_the_image_as_a_content_part_once(
    tmp_path: Path, kairox_home: Path, model: FakeOpenAIServer
) -> None:
    (tmp_path / "login.png").write_bytes(PNG)
    chat = engine(tmp_path, model, vision=True)
    chat.attach(str(tmp_path / "login.png"))
    await run(chat, "what is on this screen?")
    await run(chat, "and what should I click?")
    await chat.close()

    first = user_messages(model, 0)[-1]["content"]
    assert isinstance(first, list)
    assert first[0] == {"type": "text", "text": "what is on this screen?"}
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert first[1] == {"type": "image_url", "image_url": {"url": url}}

    older, new = user_messages(model, 1)[-2:]
    assert older["content"] == "what is on this screen?\n\n[Image dropped — was: login.png]"
    assert new["content"] == "and what should I click?"


async def test_without_vision_the_new_prompt_names_the_image_only(
    tmp_path: Path, kairox_home: Path, model: FakeOpenAIServer
) -> None:
    (tmp_path / "login.png").write_bytes(PNG)
    chat = engine(tmp_path, model, vision=False)
    chat.attach(str(tmp_path / "login.png"))
    await run(chat, "what is on this screen?")
    await chat.close()
    sent = user_messages(model, 0)[-1]["content"]
    assert sent == "what is on this screen?\n\n[attachment image login.png]"
    assert "base64" not in str(model.requests[0].body)


def test_an_image_part_counts_its_bound_not_its_base64(tmp_path: Path) -> None:
    (tmp_path / "big.png").write_bytes(PNG + bytes(30_000))
    image = from_path(tmp_path / "big.png")
    url = f"data:image/png;base64,{image['data']}"
    counter = TokenCounter()
    text_only = counter.message_tokens({"role": "user", "content": "look"})
    with_image = counter.message_tokens(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    )
    assert with_image == text_only + IMAGE_TOKENS


def test_vision_must_be_true_or_false(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"vision"):
        parse_config({"profiles": {"default": {"vision": "yes"}}})
