"""KairoxMemory driven directly, as LlamaIndex calls it: round trips through the event
store, what get() returns, and clear errors where Kairox and LlamaIndex disagree."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

from kairox_core import Kairox, UserMessageAdded
from kairox_llamaindex import HistoryConflictError, KairoxMemory, UnsupportedMessageError


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def calling(call_id: str, name: str, **kwargs: object) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=dict(kwargs))
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def result(call_id: str, text: str) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.TOOL, content=text, additional_kwargs={"tool_call_id": call_id}
    )


def shape(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role.value, m.content or "") for m in messages]


async def test_round_trip_through_the_event_store(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    await memory.aput(user("Weather in Oslo?"))
    assert memory.turn is not None
    await memory.aput_messages(
        [calling("c1", "weather", city="Oslo"), result("c1", "4 C, rain"), assistant("Rainy, 4 C.")]
    )
    assert memory.turn is None
    stored = await memory.aget_all()
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    call = next(b for b in stored[1].blocks if isinstance(b, ToolCallBlock))
    assert (call.tool_call_id, call.tool_name, call.tool_kwargs) == (
        "c1",
        "weather",
        {"city": "Oslo"},
    )
    assert stored[2].additional_kwargs["tool_call_id"] == "c1"
    assert shape([stored[0], stored[2], stored[3]]) == [
        ("user", "Weather in Oslo?"),
        ("tool", "4 C, rain"),
        ("assistant", "Rainy, 4 C."),
    ]
    # a second memory over the same session (another process, say) reads the same history
    again = KairoxMemory.from_defaults(kx, session_id=memory.session_id)
    assert shape(await again.aget_all()) == shape(stored)
    # get() between turns: the context a next turn would see, without the prompt itself
    context = await again.aget("and tomorrow?")
    assert shape(context)[-1] == ("assistant", "Rainy, 4 C.")


def test_sync_methods_and_markers(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    memory.put(user("I prefer metric units."))
    during = memory.get()
    assert shape(during)[-1] == ("user", "I prefer metric units.")
    assert memory.trace is not None
    reply = assistant('Noted. <memory scope="user" key="units">Prefers metric</memory>')
    memory.put(reply)
    assert reply.content == "Noted."  # cleaned in place: what the agent shows the user
    assert memory.last_result is not None
    assert [p.key for p in memory.last_result.proposals] == ["units"]
    assert [p.body for p in kx.approvals.pending()] == ["Prefers metric"]
    assert shape(memory.get_all()) == [("user", "I prefer metric units."), ("assistant", "Noted.")]


async def test_a_user_message_mid_turn_aborts_the_unfinished_turn(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    await memory.aput(user("first, never answered"))
    await memory.aput(user("second"))
    await memory.aput(assistant("answer"))
    users = [e.text for e in kx.events(memory.session_id) if isinstance(e, UserMessageAdded)]
    assert users == ["first, never answered", "second"]  # the audit keeps both
    assert shape(await memory.aget_all())[-1] == ("assistant", "answer")
    assert not memory.session.busy


async def test_set_extends_and_refuses_to_rewrite(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    history = [user("a"), assistant("b"), user("c"), assistant("d")]
    await memory.aset(history)
    assert shape(await memory.aget_all()) == shape(history)
    await memory.aset([*history, user("e"), assistant("f")])  # extends
    assert len(await memory.aget_all()) == 6
    with pytest.raises(HistoryConflictError, match=r"append-only.*reset"):
        await memory.aset([user("x"), assistant("y")])


async def test_reset_starts_a_new_session_and_keeps_the_old(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w", system_prompt="Be terse.")
    await memory.aset([user("a"), assistant("b")])
    old = memory.session_id
    await memory.areset()
    assert memory.session_id != old
    assert await memory.aget_all() == []
    assert memory.session.workspace_id == "w" and memory.session.system_prompt == "Be terse."
    assert len(kx.events(old)) > 1  # nothing deleted


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (ChatMessage(role=MessageRole.SYSTEM, content="x"), "'system' message.*system_prompt"),
        (ChatMessage(role=MessageRole.DEVELOPER, content="x"), "'developer' message"),
        (ChatMessage(role=MessageRole.FUNCTION, content="x"), "'function' message.*'tool'"),
        (
            ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(url="http://x/y.png")]),
            "user message holds a 'image' block",
        ),
        (
            ChatMessage(role=MessageRole.USER, blocks=[AudioBlock(url="http://x/a.mp3")]),
            "'audio' block",
        ),
    ],
)
async def test_messages_kairox_cannot_store(kx: Kairox, message: ChatMessage, match: str) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    with pytest.raises(UnsupportedMessageError, match=match):
        await memory.aput(message)
    assert memory.turn is None


async def test_order_errors_name_the_message(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    with pytest.raises(UnsupportedMessageError, match=r"no turn in progress.*user message first"):
        await memory.aput(assistant("hello"))
    await memory.aput(user("hi"))
    with pytest.raises(UnsupportedMessageError, match=r"tool message #0 .*'c9'.*none"):
        await memory.aput_messages([result("c9", "orphan")])
    bad = ChatMessage(role=MessageRole.ASSISTANT, blocks=[AudioBlock(url="http://x/a.mp3")])
    with pytest.raises(UnsupportedMessageError, match="assistant message #1 holds a 'audio'"):
        await memory.aput_messages([calling("c1", "f"), bad])
    await memory.aabort()
    assert not memory.session.busy


async def test_thinking_and_legacy_tool_calls(kx: Kairox) -> None:
    memory = KairoxMemory.from_defaults(kx, workspace="w")
    await memory.aput(user("q"))
    legacy = ChatMessage(
        role=MessageRole.ASSISTANT,
        content="",
        additional_kwargs={
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]
        },
    )
    final = ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ThinkingBlock(content="hidden reasoning"), TextBlock(text="done")],
    )
    await memory.aput_messages([legacy, result("t1", "ok"), final])
    stored = await memory.aget_all()
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].content == "done"  # the model's hidden reasoning is not the reply


def test_from_defaults_with_a_path_owns_its_kairox(kairox_home: object, tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    memory = KairoxMemory.from_defaults(tmp_path / "own.db", workspace="w")
    memory.put(user("hi"))
    memory.put(assistant("hello"))
    sid = memory.session_id
    memory.close()
    with Kairox.open(tmp_path / "own.db") as kx:
        assert [type(e).__name__ for e in kx.events(sid)][-1] == "AssistantMessageCompleted"
