from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from llama_index.llms.openai_like import OpenAILike

from kairox_core import Kairox
from kairox_core.testing.fake_openai import FakeOpenAIServer

pytest_plugins = ["kairox_core.testing.fixtures"]


@pytest.fixture
async def kx(kairox_home: Path, tmp_path: Path) -> AsyncIterator[Kairox]:
    kairox = Kairox.open(tmp_path / "kairox.db")
    yield kairox
    await kairox.aclose()


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(reply="Hello from the fake server.") as fake:
        yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILike:
    """LlamaIndex's OpenAI-compatible LLM class, over real HTTP to the fake server."""
    return OpenAILike(
        model="fake-model",
        api_base=server.base_url,
        api_key="not-used",
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=8192,
        max_retries=0,
    )
