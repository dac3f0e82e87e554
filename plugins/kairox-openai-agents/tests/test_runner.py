"""KairoxSession under a real ``Runner`` talking to a local OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner
from oai_helpers import agent_for, event_types, open_kairox, sent_messages

from kairox_core.testing.fake_openai import Action, FakeOpenAIServer
from kairox_core.tokens import TokenCounter
from kairox_openai_agents import KairoxSession


@pytest.fixture
def server() -> FakeOpenAIServer:
    with FakeOpenAIServer(reply="Noted.") as srv:
        yield srv


async def test_tool_call_turn_is_recorded_as_kairox_tool_events(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "chat-1")
        server.script(
            Action(tool_calls=(("weather", '{"city": "Paris"}'),)),
            Action(reply="It is sunny in Paris."),
        )
        result = await Runner.run(agent_for(server), "Weather in Paris?", session=session)
        assert result.final_output == "It is sunny in Paris."

        types = event_types(kx, "chat-1")
        assert types[:3] == ["SessionStarted", "UserMessageAdded", "ToolInvocationCompleted"]
        assert types[-1] == "AssistantMessageCompleted"
        tool = next(e for e in kx.events("chat-1") if e.type == "ToolInvocationCompleted")
        assert (tool.tool_call_id, tool.tool_name) == ("call_0", "weather")  # type: ignore[attr-defined]
        assert tool.arguments == '{"city": "Paris"}'  # type: ignore[attr-defined]
        assert tool.result == "sunny and 21C in Paris"  # type: ignore[attr-defined]
        assert session.last_turn is not None and session.last_turn.tool_results == 1

        # the next run sees the call and its result from Kairox's history, in order
        await Runner.run(agent_for(server), "And tomorrow?", session=session)
        sent = sent_messages(server)
        roles = [m["role"] for m in sent]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert sent[2]["tool_calls"][0]["function"]["name"] == "weather"
        assert sent[3] == {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": "sunny and 21C in Paris",
        }
        assert sent[-1]["content"] == "And tomorrow?"


async def test_memory_markers_are_routed_like_any_turn(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    reply = (
        'Got it. <memory scope="user" key="editor">Prefers vim</memory>'
        '<memory scope="session">Working on the launch plan</memory>'
    )
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "chat-2")
        server.script(Action(reply=reply))
        result = await Runner.run(agent_for(server), "I use vim.", session=session)
        assert "<memory" in result.final_output  # the SDK returns the raw reply ...
        assert session.last_turn is not None
        assert session.last_turn.text == "Got it."  # ... Kairox records it cleaned
        done = next(e for e in kx.events("chat-2") if e.type == "AssistantMessageCompleted")
        assert done.text == "Got it."  # type: ignore[attr-defined]

        # session scope: accepted at once; user scope: waits for approval
        pending = kx.approvals.pending()
        assert [(p.scope.value, p.key, p.body) for p in pending] == [
            ("user", "editor", "Prefers vim")
        ]
        await Runner.run(agent_for(server), "What am I doing?", session=session)
        system = [m["content"] for m in sent_messages(server) if m["role"] == "system"]
        assert any("Working on the launch plan" in s for s in system)
        assert not any("Prefers vim" in s for s in system)

        kx.approvals.accept(pending[0].id)
        await Runner.run(agent_for(server), "Which editor?", session=session)
        system = [m["content"] for m in sent_messages(server) if m["role"] == "system"]
        assert any("Prefers vim" in s for s in system)
        # the model sees its own protocol: its past reply keeps the tags it wrote
        # ([memory] history_tags, on by default), while people saw "Got it." (above)
        replayed = [
            str(m.get("content")) for m in sent_messages(server) if m["role"] == "assistant"
        ]
        assert any('<memory scope="user" key="editor">Prefers vim</memory>' in r for r in replayed)


def test_run_sync_opens_a_new_loop_per_call(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "chat-3")
        for prompt in ("one", "two", "three"):
            Runner.run_sync(agent_for(server), prompt, session=session)
        users = [e.text for e in kx.events("chat-3") if e.type == "UserMessageAdded"]  # type: ignore[attr-defined]
        assert users == ["one", "two", "three"]
        assert [m["content"] for m in sent_messages(server) if m["role"] == "user"] == [
            "one",
            "two",
            "three",
        ]


async def test_long_session_is_compacted_and_stays_under_the_budget(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    with open_kairox(tmp_path, window=600) as kx:
        session = KairoxSession(kx, "chat-4")
        for i in range(14):
            prompt = f"Turn {i}: the quarterly numbers for region {i} look " + "fine " * 20
            await Runner.run(agent_for(server), prompt, session=session)
        assert "CompactionSummary" in event_types(kx, "chat-4")
        items = await session.get_items()
        context = session.kairox_session.preview_sync("")
        assert context.trace.total <= context.trace.budget
        assert any("summar" in str(m.get("content", "")).lower() for m in context.messages)
        # the SDK got less than the whole history, under the budget: the newest turns,
        # older ones backfilled into the room summaries and recall did not need
        users = [i for i in items if i.get("role") == "user"]
        assert 0 < len(users) < 14
        assert str(users[-1].get("content")).startswith("Turn 13:")
        sent = [{"role": str(i.get("role")), "content": str(i.get("content"))} for i in items]
        assert TokenCounter("o200k_base").count_messages(sent) <= context.trace.budget


async def test_a_new_object_resumes_the_same_conversation(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    with open_kairox(tmp_path) as kx:
        await Runner.run(agent_for(server), "My name is Ada.", session=KairoxSession(kx, "c5"))
    with open_kairox(tmp_path) as kx:
        await Runner.run(agent_for(server), "Who am I?", session=KairoxSession(kx, "c5"))
        contents = [m["content"] for m in sent_messages(server)]
        assert contents[-3:] == ["My name is Ada.", "Noted.", "Who am I?"]


async def test_model_input_filter_recalls_on_the_question_being_asked(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    """Without the filter get_items has no question to recall for; with it the model
    call gets Kairox's context for the question itself, tool calls included."""
    with open_kairox(tmp_path, window=700) as kx:
        session = KairoxSession(kx, "chat-6")
        agent = agent_for(server)
        config = RunConfig(call_model_input_filter=session.model_input_filter)
        await Runner.run(agent, "The code for the blue door is 4417.", session=session)
        for i in range(16):
            await Runner.run(agent, f"Shipment {i}? " + "pallets " * 15, session=session)

        def recalled(messages: list[dict[str, Any]]) -> bool:
            return any(
                "[recalled turns of this conversation]" in str(m.get("content"))
                and "4417" in str(m.get("content"))
                for m in messages
            )

        await Runner.run(agent, "What was the code for the blue door?", session=session)
        assert not recalled(sent_messages(server))  # nothing recalled without the filter

        server.script(Action(tool_calls=(("weather", '{"city": "Oslo"}'),)), Action(reply="4417."))
        await Runner.run(
            agent, "Remind me: the blue door code?", session=session, run_config=config
        )
        first, second = sent_messages(server, -2), sent_messages(server, -1)
        assert recalled(first) and recalled(second)
        assert first[0] == {"role": "system", "content": "Be brief."}  # instructions kept
        assert first[-1] == {"role": "user", "content": "Remind me: the blue door code?"}
        assert [m["role"] for m in second[-3:]] == ["user", "assistant", "tool"]
        assert second[-1]["content"] == "sunny and 21C in Oslo"
        # and the turn is recorded once, as usual
        users = [e.text for e in kx.events("chat-6") if e.type == "UserMessageAdded"]  # type: ignore[attr-defined]
        assert users.count("Remind me: the blue door code?") == 1


async def test_a_streamed_run_is_recorded_like_any_run(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "chat-7")
        server.script(
            Action(tool_calls=(("weather", '{"city": "Rome"}'),)),
            Action(reply='Warm. <memory scope="session">Planning a Rome trip</memory>'),
        )
        result = Runner.run_streamed(agent_for(server), "Rome weather?", session=session)
        async for _ in result.stream_events():
            pass
        assert event_types(kx, "chat-7").count("ToolInvocationCompleted") == 1
        assert session.last_turn is not None and session.last_turn.text == "Warm."
        memories = [m["content"] for m in (await session.get_items()) if m.get("role") == "system"]
        assert any("Planning a Rome trip" in str(c) for c in memories)
