"""The SDK's own session scenarios (openai-agents 0.24 tests/memory/test_session.py, which
is written against SQLiteSession and not shipped), run on KairoxSession with the SDK's
shipped test model (``agents.testing.ScriptedModel``) through run, run_sync and
run_streamed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from oai_helpers import open_kairox

from kairox_openai_agents import KairoxSession


def _run_sync(agent: Agent[Any], prompt: str, **kw: Any) -> Any:
    loop = asyncio.new_event_loop()  # as the SDK's test does: run_sync on a thread of its own
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, prompt, **kw)
    finally:
        loop.close()


async def run(method: str, agent: Agent[Any], prompt: str, **kw: Any) -> Any:
    if method == "run":
        return await Runner.run(agent, prompt, **kw)
    if method == "run_sync":
        return await asyncio.to_thread(_run_sync, agent, prompt, **kw)
    result = Runner.run_streamed(agent, prompt, **kw)
    async for _ in result.stream_events():
        pass
    return result


def texts(items: Any) -> list[str]:
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text") or "") for p in content)
        out.append(str(content))
    return out


METHODS = ["run", "run_sync", "run_streamed"]


@pytest.mark.parametrize("method", METHODS)
async def test_session_memory_basic_functionality(tmp_path: Path, method: str) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "test_session_123")
        model = ScriptedModel()
        agent = Agent(name="test", model=model)
        model.enqueue([assistant_message("San Francisco")])
        first = await run(method, agent, "What city is the Golden Gate Bridge in?", session=session)
        assert first.final_output == "San Francisco"
        model.enqueue([assistant_message("California")])
        second = await run(method, agent, "What state is it in?", session=session)
        assert second.final_output == "California"
        assert texts(model.calls[-1].input) == [
            "What city is the Golden Gate Bridge in?",
            "San Francisco",
            "What state is it in?",
        ]


@pytest.mark.parametrize("method", METHODS)
async def test_session_memory_different_sessions(tmp_path: Path, method: str) -> None:
    with open_kairox(tmp_path) as kx:
        model = ScriptedModel()
        agent = Agent(name="test", model=model)
        cats, dogs = KairoxSession(kx, "session_1"), KairoxSession(kx, "session_2")
        model.enqueue([assistant_message("I like cats")])
        await run(method, agent, "I like cats", session=cats)
        model.enqueue([assistant_message("I like dogs")])
        await run(method, agent, "I like dogs", session=dogs)
        model.enqueue([assistant_message("Yes, you mentioned cats")])
        result = await run(method, agent, "What did I say I like?", session=cats)
        assert result.final_output == "Yes, you mentioned cats"
        sent = texts(model.calls[-1].input)
        assert "I like cats" in sent and "I like dogs" not in sent


@pytest.mark.parametrize("method", METHODS)
async def test_session_memory_disabled(tmp_path: Path, method: str) -> None:
    with open_kairox(tmp_path) as kx:
        KairoxSession(kx, "unused")
        model = ScriptedModel()
        agent = Agent(name="test", model=model)
        model.enqueue([assistant_message("Hi")])
        await run(method, agent, "Hello", session=None)
        model.enqueue([assistant_message("?")])
        await run(method, agent, "Do you remember me?", session=None)
        assert texts(model.calls[-1].input) == ["Do you remember me?"]
