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
    from kairox_core.session import Session, Turn, TurnResult

ChatInput: TypeAlias = "str | BaseMessage | Sequence[BaseMessage] | Mapping[str, Any]"
ChatOutput: TypeAlias = "AIMessage | dict[str, list[AIMessage]]"


@dataclass
class KairoxTurnReport:
    """What the last call sent and recorded: the messages the model saw, the context
    trace (layer by layer, with token counts and what was dropped) and, once the turn
    is complete, its ``TurnResult`` (the proposals among it)."""

    turn_id: str
    messages: list[BaseMessage]
    trace: Any  # kairox_core.context.trace.ContextTrace
    result: TurnResult | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class KairoxChat(Runnable[ChatInput, ChatOutput]):
    """``KairoxChat(model, session)``: ``model`` is any chat model or runnable taking a
    list of messages (``model.bind_tools(...)`` included); ``session`` a Kairox session
    (``kx.session(...)``). Input: a string, a message, a list of messages, or a
    LangGraph state with ``"messages"`` (then the output is ``{"messages": [reply]}``,
    so ``graph.add_node("chat", KairoxChat(model, session))`` works as is).

    ``invoke``/``stream`` use Kairox's synchronous twins, ``ainvoke`` the session's
    coroutines: use one kind per session. ``last_turn`` is the ``KairoxTurnReport``.
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        session: Session,
        *,
        instructions: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.session = session
        self.instructions = tuple(instructions)
        self.last_turn: KairoxTurnReport | None = None
        self._turn: Turn | None = None
        self._calls: dict[str, tuple[str, str]] = {}
        self._shown = ""  # reply text already returned beside tool calls, this turn
        self._convert = ContextConverter()

    # --- Runnable -----------------------------------------------------------------------

    def invoke(
        self, input: ChatInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatOutput:
        messages = _as_messages(input)
        turn = self._start_sync(messages)
        try:
            full = _as_ai_message(self.model.invoke(self.last_turn_messages, config, **kwargs))
            shown = turn.feed(full.text)
            reply = self._finish_sync(turn, full, shown)
        except BaseException:
            self._drop_sync()
            raise
        return _output(input, reply)

    async def ainvoke(
        self, input: ChatInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatOutput:
        messages = _as_messages(input)
        turn = await self._start(messages)
        try:
            full = _as_ai_message(
                await self.model.ainvoke(self.last_turn_messages, config, **kwargs)
            )
            shown = turn.feed(full.text)
            reply = await self._finish(turn, full, shown)
        except BaseException:
            await self._drop()
            raise
        return _output(input, reply)

    @property
    def last_turn_messages(self) -> list[BaseMessage]:
        return self.last_turn.messages if self.last_turn is not None else []

    def close(self) -> None:
        """Abort a turn left waiting for tool results, freeing the session."""
        self._drop_sync()

    # --- one turn -----------------------------------------------------------------------

    def _start_sync(self, messages: list[BaseMessage]) -> Turn:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            turn = self._tool_results(messages)
            on_kairox_loop(turn.reassemble())
        else:
            self._drop_sync()
            turn = self.session.begin_turn_sync(_prompt(last), instructions=self.instructions)
            self._turn = turn
        self._report(turn)
        return turn

    async def _start(self, messages: list[BaseMessage]) -> Turn:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            turn = self._tool_results(messages)
            await turn.reassemble()
        else:
            await self._drop()
            turn = await self.session.begin_turn(_prompt(last), instructions=self.instructions)
            self._turn = turn
        self._report(turn)
        return turn

    def _report(self, turn: Turn) -> None:
        self.last_turn = KairoxTurnReport(
            turn_id=turn.turn_id, messages=self._convert(turn.messages), trace=turn.trace
        )

    def _tool_results(self, messages: list[BaseMessage]) -> Turn:
        """Record the trailing ``ToolMessage``s as the open turn's tool results."""
        turn = self._turn
        if turn is None:
            raise UnsupportedMessageError(
                "a ToolMessage reached KairoxChat with no turn waiting for tool results "
                f"(session {self.session.id}); the tool calls must come from this "
                "KairoxChat's previous reply"
            )
        results: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.append(message)
        for message in reversed(results):
            call = self._calls.pop(message.tool_call_id, None)
            if call is None:
                continue  # recorded by an earlier call
            turn.add_tool_result(message.tool_call_id, call[0], call[1], message_text(message))
        return turn

    def _finish_sync(self, turn: Turn, full: AIMessage, shown: str) -> AIMessage:
        if full.tool_calls:
            return self._pending_calls(full, shown)
        self._turn = None
        return self._completed(turn, turn.complete_sync(), full)

    async def _finish(self, turn: Turn, full: AIMessage, shown: str) -> AIMessage:
        if full.tool_calls:
            return self._pending_calls(full, shown)
        self._turn = None
        return self._completed(turn, await turn.complete(), full)

    def _pending_calls(self, full: AIMessage, shown: str) -> AIMessage:
        calls = [dict(c) for c in full.tool_calls]
        for call in full.tool_calls:
            self._calls[call["id"] or ""] = (call["name"], tool_arguments(call["args"]))
        if self.last_turn is not None:
            self.last_turn.tool_calls = calls
        # the text beside the calls is part of the turn's reply (markup removed)
        self._shown += shown
        return AIMessage(content=shown, tool_calls=full.tool_calls, id=full.id)

    def _completed(self, turn: Turn, result: TurnResult, full: AIMessage) -> AIMessage:
        shown_before = self._shown
        if self.last_turn is not None:
            self.last_turn.result = result
        metadata = dict(full.response_metadata)
        metadata["kairox"] = {
            "session_id": self.session.id,
            "turn_id": turn.turn_id,
            "context_tokens": turn.context.tokens,
            "proposals": [p.id for p in result.proposals],
        }
        text, self._shown = result.text, ""
        if shown_before and text.startswith(shown_before):  # returned with the tool calls
            text = text[len(shown_before) :]
        return AIMessage(
            content=text,
            id=full.id,
            response_metadata=metadata,
            usage_metadata=full.usage_metadata,
        )

    def _drop_sync(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
        self._shown = ""
        if turn is not None and not turn.done:
            turn.abort_sync()

    async def _drop(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
        self._shown = ""
        if turn is not None and not turn.done:
            await turn.abort()


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
