"""Local tool calls (issue 28, item 4): a model is offered tools only when llama.cpp says
its chat template calls them; SmolLM2's cannot (refused, with the reason), Qwen2.5-Coder
0.5B's can: with the real npm server-memory configured, a chat turn creates an entity and
the next finds it (benchmarks/local_tools.py measures the same two turns)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kairox_core.chat.engine import ChatEngine
from kairox_core.config import ProviderConfig, parse_config
from kairox_core.providers import ProviderError
from kairox_core.providers.base import collect
from kairox_core.testing import mcp_servers
from kairox_llamacpp import models
from kairox_llamacpp.models import LocalModel
from kairox_llamacpp.provider import LlamaCppProvider

TOOL = {
    "type": "function",
    "function": {"name": "echo", "description": "Echo.", "parameters": {"type": "object"}},
}
QWEN_05B = "qwen2.5-coder-0.5b-instruct"


def make(model: str, **options: object) -> LlamaCppProvider:
    return LlamaCppProvider.from_config(
        ProviderConfig(id="local", kind="llamacpp", model=model, **options)
    )


async def test_a_template_without_tool_calls_is_never_offered_tools(
    smallest: LocalModel,
) -> None:
    if smallest.name != "smollm2-135m-instruct":
        pytest.skip("SmolLM2 (whose template has no tool calls) is not the smallest installed")
    provider = make(smallest.name, n_ctx=512)
    try:
        reason = await provider.tool_limitation()
        assert reason is not None and "smollm2-135m-instruct cannot call tools" in reason
        with pytest.raises(ProviderError, match="cannot call tools"):
            await collect(
                provider.stream([{"role": "user", "content": "hi"}], tools=[TOOL]), model="x"
            )
        # without tools it answers as ever
        reply = await collect(
            provider.stream([{"role": "user", "content": "hi"}], max_tokens=4), model="x"
        )
        assert reply.text
    finally:
        await provider.close()


@pytest.mark.slow
async def test_qwen_05b_creates_and_finds_an_entity_in_server_memory(
    tmp_path: Path, kairox_home: Path
) -> None:
    local = models.by_name(QWEN_05B)
    if local is None or models.part_paths(local) is None:
        pytest.skip(f"{QWEN_05B} is not installed: {local.install_command if local else ''}")
    reason = mcp_servers.node_missing()
    if reason:
        pytest.skip(f"server-memory needs node and npm: {reason}")
    command = mcp_servers.server_memory_command(tmp_path / "npm")
    memory_file = tmp_path / "graph.jsonl"
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 8192, "reserve": 200}},
            "mcp_servers": {
                "memory": {
                    "command": command[0],
                    "args": command[1:],
                    "env": {"MEMORY_FILE_PATH": str(memory_file)},
                    "timeout": 120,
                }
            },
        }
    )
    provider = make(QWEN_05B, seed=0, temperature=0.0)
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=provider)
    try:
        assert await engine.tool_notice() == ""
        outcome = await engine.run_turn(
            "Use the memory tools to create an entity named Ada, of type person, with the "
            "observation 'writes compilers'.",
            lambda _: None,
        )
        assert outcome.error is None, outcome.error
        assert any(s.ok and s.name == "memory__create_entities" for s in outcome.tool_steps)
        rows = [json.loads(line) for line in memory_file.read_text().splitlines() if line]
        ada = next(r for r in rows if r.get("name") == "Ada")
        assert "writes compilers" in ada["observations"]
        search = await engine.run_turn(
            "Use the memory tools to search for Ada, then tell me what Ada does.", lambda _: None
        )
        assert search.error is None, search.error
        found = [s for s in search.tool_steps if s.name == "memory__search_nodes"]
        assert found and found[0].ok and "writes compilers" in found[0].result
    finally:
        await engine.close()
