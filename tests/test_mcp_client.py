"""External MCP servers as tools: the real npm server-memory, driven by a scripted model,
and servers that exit at once, never answer or return 1 MB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core.chat.engine import ChatEngine
from kairox_core.config import ProviderConfig, parse_config
from kairox_core.events import ToolInvocationCompleted
from kairox_core.mcp.client import McpToolbox
from kairox_core.providers.openai_compat import create
from kairox_core.testing import mcp_servers
from kairox_core.testing.fake_openai import Action, FakeOpenAIServer

pytestmark = pytest.mark.slow

pytest.importorskip("mcp", reason="the MCP SDK is the extra kairox-core[mcp]")


@pytest.fixture(scope="session")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    reason = mcp_servers.node_missing()
    if reason:
        pytest.skip(f"server-memory needs node and npm: {reason}")
    return mcp_servers.server_memory_command(tmp_path_factory.mktemp("npm"))


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    def reply(messages: list[dict[str, Any]]) -> str:
        tools = [m["content"] for m in messages if m.get("role") == "tool"]
        return f"From memory: {tools[-1]}" if tools else "Nothing to look up."

    with FakeOpenAIServer(reply=reply) as fake:
        yield fake


def chat_with(tmp_path: Path, model: FakeOpenAIServer, servers: dict[str, Any]) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 16384, "reserve": 512}},
            "mcp_servers": servers,
            "tools": {"max_result_chars": 4000},
        }
    )
    provider = create(
        ProviderConfig(id="fake", kind="openai", model="fake-model", base_url=model.base_url)
    )
    return ChatEngine.open(config, tmp_path / "k.db", provider=provider)


def stdio(command: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": command[0], "args": command[1:], **extra}


async def test_server_memory_stores_entities_and_answers_use_search_results(
    tmp_path: Path, kairox_home: Path, model: FakeOpenAIServer, memory_server: list[str]
) -> None:
    memory_file = tmp_path / "graph.jsonl"
    entity = {"name": "Ada", "entityType": "person", "observations": ["writes compilers"]}
    model.script(
        Action(tool_calls=(("memory__create_entities", json.dumps({"entities": [entity]})),)),
        Action(
            tool_calls=(
                (
                    "memory__add_observations",
                    json.dumps(
                        {"observations": [{"entityName": "Ada", "contents": ["likes tea"]}]}
                    ),
                ),
            )
        ),
    )
    chat = chat_with(
        tmp_path,
        model,
        {"memory": stdio(memory_server, env={"MEMORY_FILE_PATH": str(memory_file)})},
    )
    try:
        first = await chat.run_turn("remember Ada", lambda _: None)
        assert first.error is None, first.error
        assert not first.tool_notes, first.tool_notes  # e.g. the server did not start
        assert [s.name for s in first.tool_steps] == [
            "memory__create_entities",
            "memory__add_observations",
        ]
        assert all(s.ok and s.source == "mcp:memory" for s in first.tool_steps)
        offered = {t["function"]["name"] for t in model.requests[0].body["tools"]}
        assert {"memory__create_entities", "memory__search_nodes"} <= offered
        # the entities are in the server's own memory file
        rows = [json.loads(line) for line in memory_file.read_text().splitlines() if line]
        ada = next(r for r in rows if r.get("name") == "Ada")
        assert ada["observations"] == ["writes compilers", "likes tea"]

        model.script(Action(tool_calls=(("memory__search_nodes", '{"query": "Ada"}'),)))
        second = await chat.run_turn("what do you know about Ada?", lambda _: None)
        assert "likes tea" in second.tool_steps[0].result
        assert second.text.startswith("From memory:") and "likes tea" in second.text
        assert second.trace.layers["tools"].included[0].source == "mcp:memory"
        # external memory stays a tool result: no pack, no long-term chunk, no proposal
        assert chat.kx.packs.list() == []
        assert all("likes tea" not in c.text for c in chat.kx.longterm.list())
        assert not chat.kx.approvals.pending()
    finally:
        await chat.close()


async def test_allow_list_and_mcp_tools_listing(tmp_path: Path, kairox_home: Path) -> None:
    config = parse_config(
        {"mcp_servers": {"stub": stdio(mcp_servers.stub(), tools=["echo", "missing"], timeout=120)}}
    )
    box = McpToolbox.for_profile(config, "default")
    try:
        tools, notes = await box.tools()
        assert [t.name for t in tools] == ["stub__echo"]
        assert any("'missing' not offered" in n for n in notes)
        assert await tools[0].call({"text": "hi <memory>"}) == "hi <memory>"
    finally:
        await box.aclose()


async def test_broken_servers_are_trace_notes_and_the_turn_completes(
    tmp_path: Path, kairox_home: Path, model: FakeOpenAIServer
) -> None:
    model.script(Action(tool_calls=(("stub__big", '{"size": 1000000}'), ("hangs__sleep", "{}"))))
    # Timeouts: a server that answers ends the wait at once, so the generous ones cost
    # nothing; "hangs" (no SDK import: it starts fast) waits out its 15 s for the call.
    chat = chat_with(
        tmp_path,
        model,
        {
            "dead": stdio(mcp_servers.exits_at_once(), timeout=120),
            "mute": stdio(mcp_servers.never_answers(), timeout=1),
            "gone": {"command": "kairox-no-such-program-here", "timeout": 120},
            "stub": stdio(mcp_servers.stub(), timeout=120),
            "hangs": stdio(mcp_servers.hangs_on_call(), timeout=15),
        },
    )
    try:
        outcome = await chat.run_turn("use the tools", lambda _: None)
        events = chat.kx.events(chat.session_id)
    finally:
        await chat.close()
    notes = "\n".join(outcome.tool_notes)
    assert "mcp server dead unavailable" in notes and "no config, bye" in notes
    assert "mcp server mute unavailable: did not answer within 1 s" in notes
    assert "mcp server gone unavailable" in notes and "PATH" in notes
    big, slow = outcome.tool_steps
    assert big.ok and big.truncated and "[cut: the result had 1000000 characters" in big.result
    assert not slow.ok and "timed out" in slow.result.lower()
    assert outcome.error is None and outcome.text.startswith("From memory:")
    trace_notes = outcome.trace.layers["tools"].notes
    assert any("mcp:stub" in n for n in trace_notes) and any("mute" in n for n in trace_notes)
    assert len([e for e in events if isinstance(e, ToolInvocationCompleted)]) == 2


async def test_a_profile_switch_swaps_the_servers(
    tmp_path: Path, kairox_home: Path, model: FakeOpenAIServer
) -> None:
    config = parse_config(
        {
            "profiles": {"a": {}, "b": {}},
            "kairox": {"default_profile": "a"},
            "mcp_servers": {"stub": {**stdio(mcp_servers.stub(), timeout=120), "profiles": ["b"]}},
        }
    )
    provider = create(
        ProviderConfig(id="fake", kind="openai", model="fake-model", base_url=model.base_url)
    )
    chat = ChatEngine.open(config, tmp_path / "k.db", provider=provider)
    try:
        assert chat.toolbox is None
        await chat.run_turn("hi", lambda _: None)
        assert "tools" not in model.requests[-1].body
        await chat.session.switch_profile("b")
        await chat.run_turn("hi again", lambda _: None)
        offered = {t["function"]["name"] for t in model.requests[-1].body["tools"]}
        assert offered == {"stub__echo", "stub__big", "stub__sleep"}
    finally:
        await chat.close()
