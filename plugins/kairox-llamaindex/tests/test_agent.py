"""A real LlamaIndex agent loop (FunctionAgent, ReActAgent) over HTTP to the fake
OpenAI-compatible server, with KairoxMemory as its memory."""

from __future__ import annotations

import json

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai_like import OpenAILike

from kairox_core import AssistantMessageCompleted, Kairox, ToolInvocationCompleted, UserMessageAdded
from kairox_core.testing.fake_openai import Action, FakeOpenAIServer
from kairox_llamaindex import KairoxMemory


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def sent(server: FakeOpenAIServer, index: int = -1) -> list[dict[str, object]]:
    """The messages the model received in request ``index``."""
    messages = server.requests[index].body["messages"]
    assert isinstance(messages, list)
    return messages


def texts(messages: list[dict[str, object]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


async def test_function_agent_turn_goes_through_kairox(
    kx: Kairox, server: FakeOpenAIServer, llm: OpenAILike
) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(add)], llm=llm)
    server.script(
        Action(tool_calls=(("add", json.dumps({"a": 2, "b": 3})),)),
        Action(reply='It is 5. <memory scope="user" key="sums">Asks about sums</memory>'),
    )
    response = await agent.run("What is 2 + 3?", memory=memory)

    assert str(response).strip() == "It is 5."  # markup removed from what the agent returns
    events = kx.events(memory.session_id)
    users = [e for e in events if isinstance(e, UserMessageAdded)]
    tools = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    replies = [e for e in events if isinstance(e, AssistantMessageCompleted)]
    assert [u.text for u in users] == ["What is 2 + 3?"]
    assert [(t.tool_name, json.loads(t.arguments), t.result) for t in tools] == [
        ("add", {"a": 2, "b": 3}, "5")
    ]
    assert [r.text.strip() for r in replies] == ["It is 5."]
    pending = kx.approvals.pending()
    proposed = [(p.scope.value, p.key, p.body) for p in pending]
    assert proposed == [("user", "sums", "Asks about sums")]
    assert memory.last_result is not None and memory.turn is None

    # the next run: the model sees Kairox's history (tool round included) and, once
    # approved, the memory
    kx.approvals.accept(pending[0].id)
    server.script(Action(reply="Sure."))
    await agent.run("And 3 + 4?", memory=memory)
    seen = sent(server)
    assert "Asks about sums" in texts(seen)
    assert seen[-1] == {"role": "user", "content": "And 3 + 4?"}
    roles = [m["role"] for m in seen if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert any(m.get("tool_calls") for m in seen if m["role"] == "assistant")


async def test_agent_input_is_kairox_assembled_context(
    kx: Kairox, server: FakeOpenAIServer, llm: OpenAILike
) -> None:
    kx.longterm.add("The launch moved to Tuesday 14 May.", scope="project", workspace_id="w")
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    agent = FunctionAgent(tools=[], llm=llm, system_prompt="Be brief.")
    server.script(Action(reply="Tuesday."))
    await agent.run("When is the launch?", memory=memory)
    seen = sent(server)
    assert seen[0] == {"role": "system", "content": "Be brief."}  # the agent's own
    assert "<memory scope=" in str(seen[1]["content"])  # Kairox's memory protocol
    assert "The launch moved to Tuesday 14 May." in texts(seen)
    assert seen[-1] == {"role": "user", "content": "When is the launch?"}


async def test_react_agent_observations_are_tool_results(
    kx: Kairox, server: FakeOpenAIServer, llm: OpenAILike
) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    agent = ReActAgent(tools=[FunctionTool.from_defaults(add)], llm=llm)
    server.script(
        Action(reply='Thought: I need the tool.\nAction: add\nAction Input: {"a": 1, "b": 4}'),
        Action(reply="Thought: I can answer.\nAnswer: It is 5."),
    )
    response = await agent.run("What is 1 + 4?", memory=memory)
    assert str(response).strip() == "It is 5."
    events = kx.events(memory.session_id)
    tools = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert [(t.tool_name, t.result) for t in tools] == [("add", "5")]
    replies = [e.text for e in events if isinstance(e, AssistantMessageCompleted)]
    assert replies == ["It is 5."]
