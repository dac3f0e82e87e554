"""KairoxChatMessageHistory: every message goes through a Kairox turn."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from kairox_core import AssistantMessageCompleted, Kairox, ToolInvocationCompleted
from kairox_langchain import KairoxChatMessageHistory, UnsupportedMessageError


def test_messages_round_trip_through_the_event_store(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    history.add_user_message("hello")
    history.add_ai_message("hi there")
    # read back by a second handle on the same session: the store, not a cache
    again = KairoxChatMessageHistory(kx, history.session_id)
    assert [(m.type, m.text) for m in again.messages] == [("human", "hello"), ("ai", "hi there")]
    kinds = [type(e).__name__ for e in kx.events(history.session_id)]
    assert "UserMessageAdded" in kinds and "AssistantMessageCompleted" in kinds


def test_markers_in_ai_messages_are_routed_through_approval(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    history.add_messages(
        [
            HumanMessage("I edit with vim"),
            AIMessage(
                'Noted.<memory scope="user" key="editor">Edits with vim</memory>'
                '<memory scope="session" key="topic">editors</memory>'
            ),
        ]
    )
    assert history.messages[-1].text == "Noted."  # the markup never reaches the history
    pending = kx.approvals.pending()
    assert [(p.scope.value, p.key, p.body) for p in pending] == [
        ("user", "editor", "Edits with vim")
    ]
    assert kx.memories.get("session", "topic", session_id=history.session_id) is not None
    assert kx.memories.get("user", "editor") is None  # waits for a person
    assert history.last_result is not None and len(history.last_result.proposals) == 2
    kx.approvals.accept(pending[0].id)
    assert kx.memories.get("user", "editor") is not None


def test_tool_calls_and_results_are_recorded_in_the_turn(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    history.add_messages(
        [
            HumanMessage("weather in Paris?"),
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
            ToolMessage("sunny, 21C", tool_call_id="c1"),
            AIMessage("It is sunny in Paris."),
        ]
    )
    tools = [e for e in kx.events(history.session_id) if isinstance(e, ToolInvocationCompleted)]
    assert [(t.tool_name, t.arguments, t.result) for t in tools] == [
        ("weather", '{"city": "Paris"}', "sunny, 21C")
    ]
    messages = history.messages
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1].tool_calls[0]["args"] == {"city": "Paris"}  # type: ignore[attr-defined]


def test_a_second_human_message_leaves_the_first_unanswered(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    history.add_user_message("first")
    history.add_user_message("second")
    history.add_ai_message("answer")
    assert [(m.type, m.text) for m in history.messages] == [
        ("human", "first"),
        ("human", "second"),
        ("ai", "answer"),
    ]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (SystemMessage("be brief"), "system_prompt"),
        (RemoveMessage(id="x"), "never deletes"),
        (ChatMessage(role="critic", content="meh"), "cannot store a ChatMessage"),
        (
            HumanMessage([{"type": "image_url", "image_url": {"url": "data:x"}}]),
            "'image_url' content block",
        ),
    ],
)
def test_messages_kairox_cannot_store_are_clear_errors(
    kx: Kairox, message: object, expected: str
) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    with pytest.raises(UnsupportedMessageError, match=expected):
        history.add_messages([HumanMessage("ok"), message])  # type: ignore[list-item]
    assert history.messages == []  # the batch is refused whole: nothing recorded


def test_order_errors_name_the_fix(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    with pytest.raises(UnsupportedMessageError, match="needs a HumanMessage before it"):
        history.add_ai_message("hello first")
    history.add_user_message("q")
    with pytest.raises(UnsupportedMessageError, match="no matching AIMessage tool call"):
        history.add_messages([ToolMessage("r", tool_call_id="nope")])
    history.close()
    assert not history.session.busy


def test_clear_archives_and_continues_in_a_new_session(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    history.add_messages([HumanMessage("a"), AIMessage("b")])
    old = history.session_id
    history.clear()
    assert history.session_id != old and history.messages == []
    assert history.session.workspace_id == "w1"
    kinds = [type(e).__name__ for e in kx.events(old)]
    assert kinds[-1] == "SessionArchived"
    assert any(isinstance(e, AssistantMessageCompleted) for e in kx.events(old))  # kept


async def test_async_methods_record_the_same_turns(kx: Kairox) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    await history.aadd_messages(
        [HumanMessage("q1"), AIMessage('a1<memory scope="user" key="k">v</memory>')]
    )
    assert [(m.type, m.text) for m in await history.aget_messages()] == [
        ("human", "q1"),
        ("ai", "a1"),
    ]
    assert [p.key for p in kx.approvals.pending()] == ["k"]
    await history.aclear()
    assert await history.aget_messages() == []


@pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainDeprecationWarning")
def test_runnable_with_message_history_drives_kairox_turns(kx: Kairox) -> None:
    model = GenericFakeChatModel(messages=iter(["first answer", "second answer"]))
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    histories: dict[str, KairoxChatMessageHistory] = {}

    def get_history(session_id: str) -> KairoxChatMessageHistory:
        if session_id not in histories:
            histories[session_id] = KairoxChatMessageHistory(kx, session_id, workspace="w1")
        return histories[session_id]

    chain = RunnableWithMessageHistory(
        prompt | model,
        get_history,
        input_messages_key="question",
        history_messages_key="history",
    )
    cfg = {"configurable": {"session_id": "s-demo"}}
    chain.invoke({"question": "one"}, config=cfg)  # type: ignore[arg-type]
    chain.invoke({"question": "two"}, config=cfg)  # type: ignore[arg-type]
    texts = [(m.type, m.text) for m in get_history("s-demo").messages]
    assert texts == [
        ("human", "one"),
        ("ai", "first answer"),
        ("human", "two"),
        ("ai", "second answer"),
    ]


plain_text = (
    st.text(alphabet=st.characters(categories=("L", "N"), include_characters=" .,?!"), min_size=1)
    .map(str.strip)
    .filter(bool)
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=st.lists(st.tuples(plain_text, plain_text), min_size=1, max_size=5))
def test_any_plain_conversation_reads_back_as_written(
    kx: Kairox, turns: list[tuple[str, str]]
) -> None:
    history = KairoxChatMessageHistory(kx, workspace="w1")
    written = [m for q, a in turns for m in (HumanMessage(q), AIMessage(a))]
    history.add_messages(written)
    assert [(m.type, m.text) for m in history.messages] == [(m.type, m.text) for m in written]
