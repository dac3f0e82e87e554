"""KairoxChat in real LangGraph graphs, driven by langchain-core's fake chat model:
the model sees Kairox's assembled context, replies go through the turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import BaseStore

from kairox_core import AssistantMessageCompleted, Kairox, ToolInvocationCompleted
from kairox_langchain import KairoxChat, KairoxStore, UnsupportedMessageError


class Recorder:
    """What the model was sent, call by call (in front of the fake model)."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        self.calls.append(list(messages))
        return messages

    def text(self, call: int) -> str:
        return "\n".join(m.text for m in self.calls[call])


def chat_graph(chat: KairoxChat) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    graph.add_edge("chat", END)
    return graph.compile()


def test_the_model_sees_kairox_context_and_markers_go_to_approval(kx: Kairox) -> None:
    seen = Recorder()
    model = GenericFakeChatModel(
        messages=iter(
            [
                'Noted. <memory scope="user" key="editor">Prefers vim</memory>',
                "You prefer vim.",
            ]
        )
    )
    session = kx.session(workspace="w1")
    chat = KairoxChat(RunnableLambda(seen) | model, session)
    app = chat_graph(chat)

    out = app.invoke({"messages": [HumanMessage("I always edit with vim")]})
    reply = out["messages"][-1]
    assert isinstance(reply, AIMessage) and reply.text == "Noted."  # markup removed
    assert reply.response_metadata["kairox"]["session_id"] == session.id
    (proposal,) = kx.approvals.pending()
    assert proposal.body == "Prefers vim" and reply.response_metadata["kairox"]["proposals"] == [
        proposal.id
    ]
    kx.approvals.accept(proposal.id)

    # a new graph thread: the state has one message, Kairox brings the rest
    out = app.invoke({"messages": [HumanMessage("which editor do I use?")]})
    assert out["messages"][-1].text == "You prefer vim."
    sent = seen.text(1)
    assert "Prefers vim" in sent  # the approved memory
    assert "I always edit with vim" in sent and "Noted." in sent  # Kairox's history
    trace = chat.last_turn.trace if chat.last_turn else None
    assert trace is not None and trace.layer("memories").tokens > 0
    assert trace.total <= trace.budget
    replies = [e.text for e in kx.events(session.id) if isinstance(e, AssistantMessageCompleted)]
    assert replies == ["Noted.", "You prefer vim."]


def test_history_is_cut_to_the_budget_and_the_trace_says_so(kx: Kairox) -> None:
    session = kx.session(workspace="w1")
    filler = "word " * 300
    for i in range(20):  # ~12k tokens of history against a 4k window
        session.run_turn_sync(f"question {i}: {filler}", f"answer {i}: {filler}")
    seen = Recorder()
    chat = KairoxChat(RunnableLambda(seen) | GenericFakeChatModel(messages=iter(["ok"])), session)
    chat.invoke("and now?")
    trace = chat.last_turn.trace if chat.last_turn else None
    assert trace is not None and trace.total <= trace.budget
    # the oldest turns did not fit verbatim: cut from history, or compacted into a summary
    assert trace.layer("history").dropped or trace.layer("summaries").tokens > 0
    sent = seen.calls[0]
    assert any(m.text.startswith("answer 19:") for m in sent)
    assert not any(m.text.startswith("question 0:") for m in sent)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_a_tool_loop_records_calls_and_results_in_one_turn(kx: Kairox) -> None:
    seen = Recorder()
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    'Checking. <memory scope="session" key="city">Paris</memory>',
                    tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}],
                ),
                " It is sunny in Paris.",
            ]
        ),
        disable_streaming=True,
    )
    session = kx.session(workspace="w1")
    chat = KairoxChat(RunnableLambda(seen) | model, session)
    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_edge(START, "chat")
    graph.add_conditional_edges("chat", tools_condition)
    graph.add_edge("tools", "chat")
    out = graph.compile().invoke({"messages": [HumanMessage("weather in Paris?")]})

    texts = [m.text for m in out["messages"]]
    assert texts == ["weather in Paris?", "Checking.", "sunny in Paris", " It is sunny in Paris."]
    assert "sunny in Paris" in seen.text(1)  # the second call saw the tool result
    # "Paris" echoes the tool's result: the session memory is tainted, so it waits for a
    # person instead of being accepted at once (issue 27)
    assert kx.memories.get("session", "city", session_id=session.id) is None
    (waiting,) = [p for p in kx.approvals.pending() if p.session_id == session.id]
    assert (waiting.key, waiting.body, waiting.tainted) == ("city", "Paris", True)
    events = kx.events(session.id)
    (call,) = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert (call.tool_name, call.result) == ("weather", "sunny in Paris")
    replies = [e for e in events if isinstance(e, AssistantMessageCompleted)]
    assert [r.turn_id for r in replies] == [call.turn_id]  # one turn
    assert replies[0].text == "Checking. It is sunny in Paris."
    assert not session.busy


async def test_an_async_graph_drives_the_session_coroutines(kx: Kairox) -> None:
    session = kx.session(workspace="w1")
    model = GenericFakeChatModel(messages=iter(["first", "second"]))
    app = chat_graph(KairoxChat(model, session))
    await app.ainvoke({"messages": [HumanMessage("one")]})
    out = await app.ainvoke({"messages": [HumanMessage("two")]})
    assert out["messages"][-1].text == "second"
    replies = [e.text for e in kx.events(session.id) if isinstance(e, AssistantMessageCompleted)]
    assert replies == ["first", "second"]


def test_a_graph_node_reads_and_writes_the_kairox_store(kx: Kairox) -> None:
    def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        store.put(("memories", "user"), "name", {"text": "The user is called Ada"})
        item = store.get(("memories", "user"), "name")
        return {"messages": [AIMessage(item.value["text"] if item else "?")]}

    graph = StateGraph(MessagesState)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    app = graph.compile(store=KairoxStore(kx))
    out = app.invoke({"messages": [HumanMessage("my name is Ada")]})
    assert out["messages"][-1].text == "The user is called Ada"
    record = kx.memories.get("user", "name")
    assert record is not None and record.body == "The user is called Ada"


def test_inputs_kairox_chat_cannot_take_are_clear_errors(kx: Kairox, tmp_path: Path) -> None:
    chat = KairoxChat(GenericFakeChatModel(messages=iter(["x"])), kx.session(workspace="w1"))
    with pytest.raises(UnsupportedMessageError, match=r"needs a HumanMessage .* not a AIMessage"):
        chat.invoke([AIMessage("hi")])
    with pytest.raises(UnsupportedMessageError, match="'messages' key"):
        chat.invoke({"question": "hi"})
    with pytest.raises(UnsupportedMessageError, match="no turn waiting for tool results"):
        from langchain_core.messages import ToolMessage

        chat.invoke([HumanMessage("q"), ToolMessage("r", tool_call_id="c9")])
    assert not chat.session.busy


def test_with_a_kairox_each_langgraph_thread_is_a_session(kx: Kairox) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    seen = Recorder()
    model = GenericFakeChatModel(messages=iter(["hello Ada", "hello Bob", "Ada, yes"]))
    chat = KairoxChat(RunnableLambda(seen) | model, kx, workspace="w1")
    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    app = graph.compile(checkpointer=InMemorySaver())

    def ask(thread: str, text: str) -> Any:
        return app.invoke(
            {"messages": [HumanMessage(text)]}, config={"configurable": {"thread_id": thread}}
        )

    ask("ada", "I am Ada")
    ask("bob", "I am Bob")
    out = ask("ada", "who am I?")
    assert [m.text for m in out["messages"]] == ["I am Ada", "hello Ada", "who am I?", "Ada, yes"]
    assert "I am Ada" in seen.text(2) and "Bob" not in seen.text(2)  # its own session only
    for thread, replies in (("ada", ["hello Ada", "Ada, yes"]), ("bob", ["hello Bob"])):
        got = [e.text for e in kx.events(thread) if isinstance(e, AssistantMessageCompleted)]
        assert got == replies
    assert kx.get_session("ada").workspace_id == "w1"
    with pytest.raises(UnsupportedMessageError, match="thread_id"):
        chat.invoke("no thread")
