"""``KairoxChat``: any LangChain chat model behind Kairox's context, as a runnable and
a LangGraph node.

Each call is a Kairox turn: the last ``HumanMessage`` is the prompt; Kairox assembles
the context under the profile's budget (system prompt, packs, memories, pinned facts,
summaries, the long-term block, retrieval and knowledge-base hits, recalled turns,
history newest first) and the model sees exactly that, never the graph's own message
list. The reply is streamed through the turn (``<memory>`` markup removed, markers
proposed for approval) and completed, so compaction and recall run after it.

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
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig

from kairox_langchain._loop import on_kairox_loop
from kairox_langchain.errors import UnsupportedMessageError
from kairox_langchain.messages import context_messages, message_text, tool_arguments

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

    # --- Runnable -----------------------------------------------------------------------

    def invoke(
        self, input: ChatInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatOutput:
        messages = _as_messages(input)
        turn = self._start_sync(messages)
        try:
            full: AIMessage | None = None
            for chunk in self.model.stream(self.last_turn_messages, config, **kwargs):
                full = _joined(full, chunk)
                turn.feed(_chunk_text(chunk))
            reply = self._finish_sync(turn, full)
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
            full: AIMessage | None = None
            async for chunk in self.model.astream(self.last_turn_messages, config, **kwargs):
                full = _joined(full, chunk)
                turn.feed(_chunk_text(chunk))
            reply = await self._finish(turn, full)
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
            turn_id=turn.turn_id, messages=context_messages(turn.messages), trace=turn.trace
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

    def _finish_sync(self, turn: Turn, full: AIMessage | None) -> AIMessage:
        if full is not None and full.tool_calls:
            return self._pending_calls(full)
        self._turn = None
        return self._completed(turn, turn.complete_sync(), full)

    async def _finish(self, turn: Turn, full: AIMessage | None) -> AIMessage:
        if full is not None and full.tool_calls:
            return self._pending_calls(full)
        self._turn = None
        return self._completed(turn, await turn.complete(), full)

    def _pending_calls(self, full: AIMessage) -> AIMessage:
        calls = [dict(c) for c in full.tool_calls]
        for call in full.tool_calls:
            self._calls[call["id"] or ""] = (call["name"], tool_arguments(call["args"]))
        if self.last_turn is not None:
            self.last_turn.tool_calls = calls
        # the text shown with the calls is already in the turn (fed while streaming)
        return AIMessage(content="", tool_calls=full.tool_calls, id=full.id)

    def _completed(self, turn: Turn, result: TurnResult, full: AIMessage | None) -> AIMessage:
        if self.last_turn is not None:
            self.last_turn.result = result
        metadata = dict(full.response_metadata) if full is not None else {}
        metadata["kairox"] = {
            "session_id": self.session.id,
            "turn_id": turn.turn_id,
            "context_tokens": turn.context.tokens,
            "proposals": [p.id for p in result.proposals],
        }
        return AIMessage(
            content=result.text,
            id=full.id if full is not None else None,
            response_metadata=metadata,
            usage_metadata=full.usage_metadata if full is not None else None,
        )

    def _drop_sync(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
        if turn is not None and not turn.done:
            turn.abort_sync()

    async def _drop(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
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


def _chunk_text(chunk: Any) -> str:
    if isinstance(chunk, BaseMessage):
        return chunk.text
    return str(chunk)


def _joined(full: AIMessage | None, chunk: Any) -> AIMessage:
    """The reply so far plus ``chunk``: streamed chunks add up; a model that does not
    stream (``disable_streaming``) yields its whole ``AIMessage`` once."""
    piece: AIMessage = (
        chunk if isinstance(chunk, AIMessage) else AIMessageChunk(content=_chunk_text(chunk))
    )
    if full is None:
        return piece
    if isinstance(full, AIMessageChunk) and isinstance(piece, AIMessageChunk):
        return full + piece
    return AIMessage(
        content=full.text + piece.text,
        tool_calls=[*full.tool_calls, *piece.tool_calls],
        id=full.id,
        response_metadata={**full.response_metadata, **piece.response_metadata},
    )


def _output(input: ChatInput, reply: AIMessage) -> ChatOutput:
    if isinstance(input, Mapping):
        return {"messages": [reply]}
    return reply
