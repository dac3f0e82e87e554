"""``KairoxChatMessageHistory``: LangChain's chat history over a Kairox session.

Every message goes through the session's turns, never around them: a ``HumanMessage``
begins a turn (``UserMessageAdded``), tool calls and their ``ToolMessage`` results are
recorded in it, and the ``AIMessage`` that answers completes it, so its ``<memory>``
markers are extracted and routed through approval and the engines (compaction, recall)
run, as in any Kairox turn. The session stays busy between a ``HumanMessage`` and its
answer. Reading returns the conversation from the event store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from kairox_langchain.errors import UnsupportedMessageError
from kairox_langchain.messages import (
    HISTORY_EVENT_TYPES,
    history_messages,
    message_text,
    tool_arguments,
)

if TYPE_CHECKING:
    from kairox_core import Kairox, Session, Turn, TurnResult

_UNSUPPORTED_HINT = {
    "SystemMessage": "Kairox keeps the system prompt with the session: pass "
    "kx.session(system_prompt=...) or set [kairox] system_prompt in kairox.toml",
    "RemoveMessage": "Kairox never deletes history (the event store is an audit "
    "trail); compaction summarises old turns, clear() starts a new session",
}


class KairoxChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` backed by one Kairox session.

    ``KairoxChatMessageHistory(kx, session_id=None, workspace=None, profile=None)``
    resumes ``session_id`` or starts a session. Use the sync or the async methods on
    one history, not both (Kairox: "drive one session either through the twins or
    from your own loop"). ``last_result`` is the last completed turn's
    ``TurnResult`` (its ``proposals`` wait in ``kx.approvals``).
    """

    def __init__(
        self,
        kx: Kairox,
        session_id: str | None = None,
        *,
        workspace: str | None = None,
        profile: str | None = None,
    ) -> None:
        self.kx = kx
        self.session: Session = kx.session(
            workspace=workspace, profile=profile, session_id=session_id
        )
        self._turn: Turn | None = None
        self._calls: dict[str, tuple[str, str]] = {}  # tool_call_id -> (name, arguments)
        self.last_result: TurnResult | None = None

    @property
    def session_id(self) -> str:
        return self.session.id

    # --- reading -------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The whole conversation, oldest first, read from the event store (a turn in
        progress shows its user message and the tool calls recorded so far)."""
        events = self.kx.events(self.session.id, types=HISTORY_EVENT_TYPES)
        return history_messages(events)

    # --- writing (sync: Kairox's synchronous twins) --------------------------------

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for message in messages:
            self._check_supported(message)
        for message in messages:
            if isinstance(message, HumanMessage):
                if self._turn is not None:
                    self._turn.abort_sync()  # unanswered: the user message stays
                self._calls.clear()
                self._turn = self.session.begin_turn_sync(message_text(message))
            elif isinstance(message, AIMessage):
                turn = self._open_turn(message)
                text = message_text(message)
                if message.tool_calls:
                    self._start_calls(turn, message, text)
                else:
                    self._turn = None
                    self.last_result = turn.complete_sync(text)
            elif isinstance(message, ToolMessage):
                self._record_result(message)

    def clear(self) -> None:
        """Archive this session (nothing is deleted: the events stay as an audit trail)
        and continue in a new session of the same workspace and profile."""
        self._drop_turn_sync()
        old = self.session
        old.archive_sync(reason="KairoxChatMessageHistory.clear()")
        self.session = self.kx.session(workspace=old.workspace_id, profile=old.profile)

    def close(self) -> None:
        """Abort a turn still waiting for its answer, freeing the session."""
        self._drop_turn_sync()

    # --- writing (async: the session's own coroutines, on the caller's loop) -------

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        for message in messages:
            self._check_supported(message)
        for message in messages:
            if isinstance(message, HumanMessage):
                if self._turn is not None:
                    await self._turn.abort()
                self._calls.clear()
                self._turn = await self.session.begin_turn(message_text(message))
            elif isinstance(message, AIMessage):
                turn = self._open_turn(message)
                text = message_text(message)
                if message.tool_calls:
                    self._start_calls(turn, message, text)
                else:
                    self._turn = None
                    self.last_result = await turn.complete(text)
            elif isinstance(message, ToolMessage):
                self._record_result(message)

    async def aclear(self) -> None:
        if self._turn is not None:
            turn, self._turn = self._turn, None
            await turn.abort()
        old = self.session
        await old.archive(reason="KairoxChatMessageHistory.clear()")
        self.session = self.kx.session(workspace=old.workspace_id, profile=old.profile)

    # --- the turn state machine ----------------------------------------------------

    def _check_supported(self, message: BaseMessage) -> None:
        """Refuse the whole batch before writing anything when one message cannot be
        stored (type or content), so a batch is never half recorded."""
        if not isinstance(message, (HumanMessage, AIMessage, ToolMessage)):
            name = type(message).__name__
            hint = _UNSUPPORTED_HINT.get(
                name, "Kairox records user messages, replies, tool calls and tool results"
            )
            raise UnsupportedMessageError(
                f"KairoxChatMessageHistory cannot store a {name} "
                f"(session {self.session.id}): {hint}"
            )
        message_text(message)  # raises on non-text content

    def _open_turn(self, message: BaseMessage) -> Turn:
        if self._turn is None:
            kind = type(message).__name__
            raise UnsupportedMessageError(
                f"a {kind} needs a HumanMessage before it in session {self.session.id}: "
                f"Kairox records a turn as a user message and its answer; add the "
                f"HumanMessage first"
            )
        return self._turn

    def _start_calls(self, turn: Turn, message: AIMessage, text: str) -> None:
        if text:
            turn.feed(text)  # part of the reply: its markers are extracted too
        for call in message.tool_calls:
            self._calls[call["id"] or ""] = (call["name"], tool_arguments(call["args"]))

    def _record_result(self, message: ToolMessage) -> None:
        turn = self._open_turn(message)
        call = self._calls.pop(message.tool_call_id, None)
        if call is None:
            raise UnsupportedMessageError(
                f"ToolMessage for tool call '{message.tool_call_id}' has no matching "
                f"AIMessage tool call in the turn in progress (session {self.session.id}); "
                f"add the AIMessage with that tool call first"
            )
        name, arguments = call
        turn.add_tool_result(message.tool_call_id, name, arguments, message_text(message))

    def _drop_turn_sync(self) -> None:
        if self._turn is not None:
            turn, self._turn = self._turn, None
            turn.abort_sync()
