"""A model that cannot call tools is never offered them, and the chat says so before the
turn (issue 28, item 4): the provider hook, the engine's notice, plain mode, the web."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core.capabilities import CapabilityError, ProviderCapabilities, verify
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.plain import PlainChat
from kairox_core.config import parse_config
from kairox_core.providers.base import ChatChunk, ChatResult, Message, ToolCall, collect
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.toolloop import Tool, tool_limitation
from kairox_core.web.turns import stream_turn


async def echo(args: dict[str, Any]) -> str:
    return str(args)


ECHO = Tool("echo", "Echo.", {"type": "object", "properties": {}}, echo, source="test")


class Box:
    def __init__(self, *tools: Tool) -> None:
        self._tools = list(tools)

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def aclose(self) -> None:
        pass


class LocalModel(ScriptedProvider):
    """A tool-calling provider whose model may not call tools (a local chat template)."""

    capabilities = ProviderCapabilities(tools=True, tool_limitation=True)

    def __init__(self, reason: str | None, replies: Sequence[str] = ("Done.",)) -> None:
        super().__init__(replies)
        self.reason = reason
        self.offered: list[Any] = []

    async def tool_limitation(self) -> str | None:
        return self.reason

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
    ) -> AsyncIterator[ChatChunk]:
        self.offered.append(tools)
        if tools and len(self.offered) == 1:
            yield ChatChunk(finish_reason="tool_calls", tool_calls=(ToolCall("c1", "echo", "{}"),))
            return
        async for chunk in super().stream(messages, max_tokens=max_tokens):
            yield chunk

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
    ) -> ChatResult:
        return await collect(
            self.stream(messages, max_tokens=max_tokens, tools=tools), model=self.model
        )


REASON = "the local model tiny cannot call tools (its chat template has no tool calls)"


def chat(tmp_path: Path, provider: Any, *, servers: bool = False) -> ChatEngine:
    raw: dict[str, Any] = {"profiles": {"default": {"context_window": 4096, "reserve": 256}}}
    if servers:
        raw["mcp_servers"] = {"memory": {"command": "node", "args": ["index.js"]}}
    return ChatEngine.open(parse_config(raw), tmp_path / "k.db", provider=provider)


async def test_the_provider_hook_decides_and_a_plain_provider_cannot() -> None:
    assert await tool_limitation(LocalModel(None)) is None
    assert await tool_limitation(LocalModel(REASON)) == REASON
    assert await tool_limitation(ScriptedProvider()) == "provider scripted cannot call tools"


class Undeclared(LocalModel):
    """Has ``tool_limitation`` but does not declare it: the method is never probed for."""

    capabilities = ProviderCapabilities(tools=True)


class ClaimsWithoutMethod(ScriptedProvider):
    capabilities = ProviderCapabilities(tool_limitation=True)


async def test_the_limitation_is_declared_not_probed() -> None:
    assert await tool_limitation(Undeclared(REASON)) is None
    with pytest.raises(CapabilityError, match=r"'tool_limitation'.*lacks tool_limitation"):
        verify(ClaimsWithoutMethod(), "model provider 'claims'")


async def test_a_model_that_can_call_tools_gets_them_and_no_notice(
    tmp_path: Path, kairox_home: Path
) -> None:
    model = LocalModel(None)
    engine = chat(tmp_path, model)
    engine.toolbox = Box(ECHO)
    try:
        assert await engine.tool_notice() == ""
        outcome = await engine.run_turn("echo", lambda _: None)
        assert [s.name for s in outcome.tool_steps] == ["echo"] and outcome.text == "Done."
        assert model.offered[0][0]["function"]["name"] == "echo"
    finally:
        await engine.close()


async def test_a_model_that_cannot_is_told_before_the_turn_and_never_offered(
    tmp_path: Path, kairox_home: Path
) -> None:
    model = LocalModel(REASON)
    engine = chat(tmp_path, model)
    engine.toolbox = Box(ECHO)
    err = io.StringIO()
    try:
        code = await PlainChat(engine, ["create Ada\n"], io.StringIO(), err).run()
        assert code == 0
        lines = err.getvalue().splitlines()
        notice = f"kairox: {REASON}: the 1 tool(s) of the MCP servers are not offered to it"
        assert notice in lines
        assert lines.index(notice) < lines.index("kairox: thinking…")  # before the turn
        assert model.offered == [None]  # not offered, in no form
        system = model.calls[0][0]["content"]
        assert "echo" not in system  # nor described in text
    finally:
        await engine.close()


async def test_no_tools_configured_means_no_notice(tmp_path: Path, kairox_home: Path) -> None:
    engine = chat(tmp_path, LocalModel(REASON))
    try:
        assert await engine.tool_notice() == ""
    finally:
        await engine.close()


async def test_the_web_says_first_that_it_starts_no_mcp_servers(
    tmp_path: Path, kairox_home: Path
) -> None:
    # the web builds its engines itself, with no toolbox (kairox_core/web/turns.py)
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 256}},
            "mcp_servers": {"memory": {"command": "node", "args": ["index.js"]}},
        }
    )
    from kairox_core.facade import Kairox

    kx = Kairox.open(tmp_path / "w.db", config=config)
    try:
        engine = ChatEngine(kx, kx.session(), config, provider=LocalModel(None), provider_note="")
        events = [name async for name, _ in stream_turn(engine, "hello")]
        first = [data async for name, data in stream_turn(engine, "again") if name == "notice"]
    finally:
        await kx.aclose()
    assert events[0] == "notice" and "delta" in events
    expected = "this front end does not start MCP servers: the tools of memory are not offered"
    assert first == [{"message": expected}]


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_tui_says_it_before_the_first_turn(tmp_path: Path, kairox_home: Path) -> None:
    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.widgets import ChatMessage

    model = LocalModel(REASON)
    engine = chat(tmp_path, model)
    engine.toolbox = Box(ECHO)
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        errors = [m.text for m in app.query(ChatMessage) if m.role == "error"]
        assert errors == [f"{REASON}: the 1 tool(s) of the MCP servers are not offered to it"]
        assert model.calls == []  # no turn yet
    await engine.close()
