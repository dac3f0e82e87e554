"""A real Agents SDK Runner against Kairox's fake OpenAI-compatible server (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from kairox_core import Kairox
from kairox_core.testing.fake_openai import FakeOpenAIServer

set_tracing_disabled(True)  # the SDK's trace export would try the network

SMALL_WINDOW = """
[profiles.default]
context_window = {window}
reserve = 0
compaction_trigger = 0.7

[compaction]
keep_recent_exchanges = 2
target_tokens = 64
"""


@function_tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny and 21C in {city}"


def agent_for(server: FakeOpenAIServer, **kw: Any) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather], **kw)


@contextmanager
def open_kairox(tmp_path: Path, *, window: int | None = None) -> Iterator[Kairox]:
    config = None
    if window is not None:
        config = tmp_path / "kairox.toml"
        config.write_text(SMALL_WINDOW.format(window=window))
    with Kairox.open(tmp_path / "kairox.db", config) as kx:
        yield kx


def sent_messages(server: FakeOpenAIServer, index: int = -1) -> list[dict[str, Any]]:
    """The chat messages the model received in request ``index``."""
    messages: list[dict[str, Any]] = server.requests[index].body["messages"]
    return messages


def event_types(kx: Kairox, session_id: str) -> list[str]:
    return [e.type for e in kx.events(session_id)]
