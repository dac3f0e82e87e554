"""``KairoxChat``: any LangChain chat model behind Kairox's context, as a runnable and
a LangGraph node.

Each call is a Kairox turn: the last ``HumanMessage`` is the prompt; Kairox assembles
the context under the profile's budget (system prompt, packs, memories, pinned facts,
summaries, the long-term block, retrieval and knowledge-base hits, recalled turns,
history newest first) and the model sees exactly that, never the graph's own message
list. The reply goes through the turn (``<memory>`` markup removed, markers proposed
for approval) and completes it, so compaction and recall run after it.

A reply with tool calls keeps the turn open: the graph's tool node answers with
``ToolMessage``s, and the next call records them as the turn's tool results and asks
the model again with the context re-assembled around them.

Given a ``Kairox`` instead of a session, each LangGraph thread is its own Kairox
session: ``config["configurable"]["thread_id"]`` is the session id (resumed, or started
in ``workspace`` with ``profile``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig

from kairox_langchain._loop import on_kairox_loop
from kairox_langchain.errors import UnsupportedMessageError
from kairox_langchain.messages import ContextConverter, message_text, tool_arguments

if TYPE_CHECKING:
    from kairox_core import Kairox, Session, Turn, TurnResult

ChatInput: TypeAlias = "str | BaseMessage | Sequence[BaseMessage] | Mapping[str, Any]"
ChatOutput: TypeAlias = "AIMessage | dict[str, list[AIMessage]]"


@dataclass
class KairoxTurnReport:
    """What the last call sent and recorded: the messages the model saw, the context
    trace (layer by layer, with token counts and what was dropped) and, once the turn
    is complete, its ``TurnResult`` (the proposals among it)."""

    session_id: str
    turn_id: str
    messages: list[BaseMessage]
    trace: Any  # kairox_core.context.trace.ContextTrace
    result: TurnResult | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Conversation:
    """One session's state between calls: the turn waiting for tool results."""

    session: Session
    turn: Turn | None = None
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)
    shown: str = ""  # reply text already returned beside tool calls, this turn
    convert: ContextConverter = field(default_factory=ContextConverter)
    report: KairoxTurnReport | None = None

    def forget_turn(self) -> Turn | None:
        turn, self.turn = self.turn, None
        self.calls.clear()
        self.shown = ""
        return turn if turn is not None and not turn.done else None


class KairoxChat(Runnable[ChatInput, ChatOutput]):
    """``KairoxChat(model, session)`` or ``KairoxChat(model, kx, workspace=...,
    profile=...)``: ``model`` is any chat model or runnable taking a list of messages
    (``model.bind_tools(...)`` included). With a session, every call is a turn of it;
    with a ``Kairox``, of the session named by the LangGraph ``thread_id``. Input: a
    string, a message, a list of messages, or a LangGraph state with ``"messages"``
    (then the output is ``{"messages": [reply]}``, so
    ``graph.add_node("chat", KairoxChat(...))`` works as is).

    ``invoke`` uses Kairox's synchronous twins, ``ainvoke`` the session's coroutines:
    use one kind per session. ``last_turn`` is the last call's ``KairoxTurnReport``.
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        session: Session | Kairox,
        *,
        workspace: str | None = None,
        profile: str | None = None,
        instructions: Sequence[str] = (),
    ) -> None:
        from kairox_core import Session

        self.model = model
        self.instructions = tuple(instructions)
        self.last_turn: KairoxTurnReport | None = None
        self._fixed = _Conversation(session) if isinstance(session, Session) else None
        self._kx = None if isinstance(session, Session) else session
        self.workspace = workspace
        self.profile = profile
        self._threads: dict[str, _Conversation] = {}

    @property
    def session(self) -> Session:
        """The session of ``KairoxChat(model, session)`` (or of the last thread)."""
        if self._fixed is not None:
            return self._fixed.session
        if self.last_turn is not None:
            return self._threads[self.last_turn.session_id].session
        raise UnsupportedMessageError(
            "this KairoxChat picks a session per LangGraph thread_id and has run none yet"
        )

    def _conversation(self, config: RunnableConfig | None) -> _Conversation:
        if self._fixed is not None:
            return self._fixed
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        if thread is None:
            raise UnsupportedMessageError(
                "KairoxChat(model, kx) uses the LangGraph thread_id as the Kairox session "
                "id: pass config={'configurable': {'thread_id': ...}} (or compile the graph "
                "with a checkpointer), or give KairoxChat a session"
            )
        sid = str(thread)
        conv = self._threads.get(sid)
        if conv is None:
            assert self._kx is not None
            session = self._kx.session(
                workspace=self.workspace, profile=self.profile, session_id=sid
            )
            conv = self._threads[sid] = _Conversation(session)
        return conv

    # --- Runnable -----------------------------------------------------------------------

    def invoke(
        self, input: ChatInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatOutput:
        messages = _as_messages(input)
        conv = self._conversation(config)
        turn = self._start_sync(conv, messages)
        try:
            sent = self._sent(conv)
            full = _as_ai_message(self.model.invoke(sent, config, **kwargs))
            shown = turn.feed(full.text)
            if full.tool_calls:
                reply = self._pending_calls(conv, full, shown)
            else:
                conv.turn = None
                reply = self._completed(conv, turn, turn.complete_sync(), full)
        except BaseException:
            dropped = conv.forget_turn()
            if dropped is not None:
                dropped.abort_sync()
            raise
        return _output(input, reply)

    async def ainvoke(
        self, input: ChatInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatOutput:
        messages = _as_messages(input)
        conv = self._conversation(config)
        turn = await self._start(conv, messages)
        try:
            sent = self._sent(conv)
            full = _as_ai_message(await self.model.ainvoke(sent, config, **kwargs))
            shown = turn.feed(full.text)
            if full.tool_calls:
                reply = self._pending_calls(conv, full, shown)
            else:
                conv.turn = None
                reply = self._completed(conv, turn, await turn.complete(), full)
        except BaseException:
            dropped = conv.forget_turn()
            if dropped is not None:
                await dropped.abort()
            raise
        return _output(input, reply)

    def close(self) -> None:
        """Abort turns left waiting for tool results, freeing their sessions."""
        for conv in [*([self._fixed] if self._fixed else []), *self._threads.values()]:
            dropped = conv.forget_turn()
            if dropped is not None:
                dropped.abort_sync()

    # --- one turn -----------------------------------------------------------------------

    def _start_sync(self, conv: _Conversation, messages: list[BaseMessage]) -> Turn:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            turn = self._tool_results(conv, messages)
            on_kairox_loop(turn.reassemble())
        else:
            prompt = _prompt(last)
            dropped = conv.forget_turn()
            if dropped is not None:
                dropped.abort_sync()
            turn = conv.session.begin_turn_sync(prompt, instructions=self.instructions)
            conv.turn = turn
        self._report(conv, turn)
        return turn

    async def _start(self, conv: _Conversation, messages: list[BaseMessage]) -> Turn:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            turn = self._tool_results(conv, messages)
            await turn.reassemble()
        else:
            prompt = _prompt(last)
            dropped = conv.forget_turn()
            if dropped is not None:
                await dropped.abort()
            turn = await conv.session.begin_turn(prompt, instructions=self.instructions)
            conv.turn = turn
        self._report(conv, turn)
        return turn

    def _report(self, conv: _Conversation, turn: Turn) -> None:
        conv.report = self.last_turn = KairoxTurnReport(
            session_id=conv.session.id,
            turn_id=turn.turn_id,
            messages=conv.convert(turn.messages),
            trace=turn.trace,
        )

    @staticmethod
    def _sent(conv: _Conversation) -> list[BaseMessage]:
        return conv.report.messages if conv.report is not None else []

    def _tool_results(self, conv: _Conversation, messages: list[BaseMessage]) -> Turn:
        """Record the trailing ``ToolMessage``s as the open turn's tool results."""
        turn = conv.turn
        if turn is None:
            raise UnsupportedMessageError(
                "a ToolMessage reached KairoxChat with no turn waiting for tool results "
                f"(session {conv.session.id}); the tool calls must come from this "
                "KairoxChat's previous reply"
            )
        results: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.append(message)
        for message in reversed(results):
            call = conv.calls.pop(message.tool_call_id, None)
            if call is None:
                continue  # recorded by an earlier call
            turn.add_tool_result(message.tool_call_id, call[0], call[1], message_text(message))
        return turn

    def _pending_calls(self, conv: _Conversation, full: AIMessage, shown: str) -> AIMessage:
        for call in full.tool_calls:
            conv.calls[call["id"] or ""] = (call["name"], tool_arguments(call["args"]))
        if conv.report is not None:
            conv.report.tool_calls = [dict(c) for c in full.tool_calls]
        # the text beside the calls is part of the turn's reply (markup removed)
        conv.shown += shown
        return AIMessage(content=shown, tool_calls=full.tool_calls, id=full.id)

    def _completed(
        self, conv: _Conversation, turn: Turn, result: TurnResult, full: AIMessage
    ) -> AIMessage:
        if conv.report is not None:
            conv.report.result = result
        text, shown_before = result.text, conv.shown
        conv.shown = ""
        if shown_before and text.startswith(shown_before):  # returned with the tool calls
            text = text[len(shown_before) :]
        metadata = dict(full.response_metadata)
        metadata["kairox"] = {
            "session_id": conv.session.id,
            "turn_id": turn.turn_id,
            "context_tokens": turn.context.tokens,
            "proposals": [p.id for p in result.proposals],
        }
        return AIMessage(
            content=text,
            id=full.id,
            response_metadata=metadata,
            usage_metadata=full.usage_metadata,
        )


def _as_messages(input: ChatInput) -> list[BaseMessage]:
    if isinstance(input, str):
        return [HumanMessage(content=input)]
    if isinstance(input, BaseMessage):
        return [input]
    if isinstance(input, Mapping):
        if "messages" not in input:
            raise UnsupportedMessageError(
                "KairoxChat takes a string, messages, or a LangGraph state with a "
                f"'messages' key; this state has {sorted(input)}"
            )
        input = input["messages"]
    given: list[object] = list(input)
    messages = [m for m in given if isinstance(m, BaseMessage)]
    if not messages or len(messages) != len(given):
        raise UnsupportedMessageError(
            "KairoxChat needs at least one message, all LangChain BaseMessage objects"
        )
    return messages


def _prompt(last: BaseMessage) -> str:
    if not isinstance(last, HumanMessage):
        raise UnsupportedMessageError(
            f"KairoxChat needs a HumanMessage (the prompt) or ToolMessages (results of its "
            f"own tool calls) last, not a {type(last).__name__}: Kairox assembles the rest "
            f"of the context itself"
        )
    return message_text(last)


def _as_ai_message(reply: Any) -> AIMessage:
    """The model's reply as an ``AIMessage`` (a runnable may return a plain string)."""
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, BaseMessage):
        return AIMessage(content=reply.content)
    return AIMessage(content=str(reply))


def _output(input: ChatInput, reply: AIMessage) -> ChatOutput:
    if isinstance(input, Mapping):
        return {"messages": [reply]}
    return reply
