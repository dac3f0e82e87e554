"""``KairoxMemory``: a LlamaIndex agent memory that is a Kairox session.

LlamaIndex agents (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``) talk to their
memory in a fixed rhythm: ``aput(user message)``, ``aget()`` for the model's input
(again after each tool round), then ``aput_messages(...)`` with the assistant's tool
calls, the tool results and the final reply. That is a Kairox turn: the user message
begins it (Kairox assembles the context under the budget: packs, memories, summaries,
long-term chunks, retrieval hits, recalled turns, then history), ``aget`` returns that
assembled context, tool results are recorded as tool events (untrusted text), and the
reply completes it, which strips ``<memory>`` markup and routes the markers through the
approval flow, then runs the engines (compaction, recall indexing).

Kairox's event store is append-only, so ``set`` can only extend what is stored and
``reset`` starts a new session (the old one stays in the audit trail).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.memory import BaseMemory

from kairox_core import (
    AssistantMessageCompleted,
    Kairox,
    KairoxUserError,
    Session,
    ToolInvocationCompleted,
    Turn,
    TurnResult,
    UserMessageAdded,
    front_end_system_prompt,
    run_sync,
)
from kairox_core.markers import extract_memory_markers
from kairox_llamaindex.convert import (
    ASSISTANT_ROLES,
    ToolCall,
    UnsupportedMessageError,
    message_text,
    to_chat_message,
    to_chat_messages,
    tool_calls,
)
from kairox_llamaindex.react import split_react_trace
from kairox_llamaindex.tokenizer import use_offline_tokenizer


class HistoryConflictError(KairoxUserError):
    """``set`` was asked to replace history that Kairox has already stored."""


class KairoxMemory(BaseMemory):
    """A LlamaIndex ``BaseMemory`` backed by a Kairox session: pass it as ``memory=``.

    Build it with ``KairoxMemory.from_defaults(kx, workspace=..., profile=...)`` (or a
    database path instead of ``kx``), or ``KairoxMemory(session)`` over a session you
    already hold. Drive one memory either with the async methods (what agents call) or
    with the synchronous ones, not both at once.
    """

    _session: Session = PrivateAttr()
    _owned: Kairox | None = PrivateAttr(default=None)
    _kairox: Kairox | None = PrivateAttr(default=None)
    _turn: Turn | None = PrivateAttr(default=None)
    _calls: list[ToolCall] = PrivateAttr(default_factory=list)
    _said: list[str] = PrivateAttr(default_factory=list)
    _last: TurnResult | None = PrivateAttr(default=None)

    def __init__(self, session: Session, *, kairox: Kairox | None = None, **data: Any) -> None:
        super().__init__(**data)
        use_offline_tokenizer()
        self._session = session
        self._kairox = kairox  # reset opens its next session there

    @classmethod
    def class_name(cls) -> str:
        return "KairoxMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        kairox: Kairox | str | os.PathLike[str] | None = None,
        *,
        config: Any = None,
        workspace: str | None = None,
        profile: str | None = None,
        session_id: str | None = None,
        system_prompt: str | None = None,
    ) -> KairoxMemory:
        """A memory over a new session, or over ``session_id`` resumed. ``kairox`` is an
        open ``Kairox`` or a database path/URL (then opened with ``config`` and closed by
        ``close()``; None: the configured database). ``system_prompt`` None: what Kairox's
        own front ends send, ``[kairox] system_prompt`` or else the memory protocol that
        teaches the model the ``<memory>`` tags (without it no memory is ever proposed)."""
        owned = None
        if isinstance(kairox, Kairox):
            kx = kairox
        else:
            kx = owned = Kairox.open(kairox, config)
        if system_prompt is None:
            system_prompt = front_end_system_prompt(kx.config)
        try:
            session = kx.session(workspace, profile, session_id, system_prompt=system_prompt)
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        memory = cls(session, kairox=kx)
        memory._owned = owned
        return memory

    # --- what users read -------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The Kairox session this memory records into (a new one after ``reset``)."""
        return self._session

    @property
    def session_id(self) -> str:
        return self._session.id

    @property
    def kairox(self) -> Kairox:
        """The ``Kairox`` the session came from (given to ``from_defaults`` or as
        ``kairox=``); a session does not hold it."""
        if self._kairox is None:
            raise KairoxUserError(
                "this KairoxMemory was built from a session alone; build it with "
                "KairoxMemory(session, kairox=kx) or KairoxMemory.from_defaults(kx, ...)"
            )
        return self._kairox

    @property
    def turn(self) -> Turn | None:
        """The turn in progress: begun by a user message, not yet replied to."""
        return self._turn

    @property
    def trace(self) -> Any:
        """Why the last assembled context holds what it holds (``kairox context``'s
        layers): the turn in progress, else None."""
        return self._turn.trace if self._turn is not None else None

    @property
    def last_result(self) -> TurnResult | None:
        """The last completed turn: the cleaned reply, its markers and proposals."""
        return self._last

    # --- writing ---------------------------------------------------------------------

    async def aput(self, message: ChatMessage) -> None:
        """Record one message: a user message begins a turn, tool results are recorded
        in it, an assistant reply without tool calls completes it."""
        await self._put(message, None)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        for index, message in enumerate(messages):
            await self._put(message, index)

    async def _put(self, message: ChatMessage, index: int | None) -> None:
        role = message.role
        if role == MessageRole.USER:
            await self._begin(message_text(message, index))
        elif role in ASSISTANT_ROLES:
            await self._assistant(message, index)
        elif role == MessageRole.TOOL:
            self._tool_result(message, index)
        elif role in (MessageRole.SYSTEM, MessageRole.DEVELOPER):
            raise UnsupportedMessageError(
                f"Kairox cannot store a '{role.value}' message in a session's history: "
                f"its system prompt is configuration, assembled into every turn; pass "
                f"system_prompt=... to KairoxMemory.from_defaults or to the agent"
            )
        else:
            raise UnsupportedMessageError(
                f"Kairox cannot store a '{role.value}' message: it records user, "
                f"assistant and tool messages; send a legacy function result as a "
                f"'tool' message with additional_kwargs['tool_call_id']"
            )

    async def _begin(self, prompt: str) -> None:
        if self._turn is not None:  # the last run stopped before its reply (an error)
            await self.aabort()
        self._turn = await self._session.begin_turn(prompt)
        self._calls.clear()
        self._said.clear()

    def _open_turn(self, message: ChatMessage, index: int | None) -> Turn:
        if self._turn is None:
            where = f"{message.role.value} message" + (f" #{index}" if index is not None else "")
            raise UnsupportedMessageError(
                f"{where} arrived with no turn in progress: Kairox records replies and "
                f"tool results inside a turn that a user message began; put the user "
                f"message first"
            )
        return self._turn

    async def _assistant(self, message: ChatMessage, index: int | None) -> None:
        turn = self._open_turn(message, index)
        text = message_text(message, index)
        calls = tool_calls(message)
        if calls:  # a tool round: the results follow as tool messages
            self._calls.extend(calls)
            if text.strip():
                self._said.append(text)
            return
        trace = split_react_trace(text)
        if trace is not None:  # ReActAgent: its whole reasoning, observations included
            for i, step in enumerate(trace.steps):
                turn.add_tool_result(f"react-{i}", step.action, step.action_input, step.observation)
            text = trace.reply
        self._said.append(text)
        reply = "\n\n".join(part for part in self._said if part.strip())
        self._turn = None
        self._last = await turn.complete(reply)
        _clean_in_place(message)

    def _tool_result(self, message: ChatMessage, index: int | None) -> None:
        turn = self._open_turn(message, index)
        call_id = message.additional_kwargs.get("tool_call_id")
        # the newest call with this id (ids repeat across model calls with some servers)
        call = next((c for c in reversed(self._calls) if c.id == call_id), None)
        if call is None:
            known = ", ".join(c.id for c in self._calls) or "none"
            raise UnsupportedMessageError(
                f"tool message{'' if index is None else f' #{index}'} answers tool call "
                f"{call_id!r}, which no assistant message of this turn made (calls so far: "
                f"{known}); put the assistant message with its tool calls first"
            )
        self._calls.remove(call)
        turn.add_tool_result(call.id, call.name, call.arguments, message_text(message, index))

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Extend the stored history to ``messages``: what is stored must be their
        beginning (Kairox never rewrites history); the rest is recorded as turns."""
        stored = await self.aget_all()
        have = [_signature(m) for m in stored]
        want = [_signature(m) for m in messages[: len(stored)]]
        if have != want:
            raise HistoryConflictError(
                f"session {self.session_id} already holds {len(stored)} messages that the "
                f"new history does not start with; Kairox's event store is append-only, so "
                f"set() can only extend it: call reset() first for a new session, or put() "
                f"the new messages"
            )
        await self.aput_messages(messages[len(stored) :])

    async def areset(self) -> None:
        """Start a new Kairox session (same workspace, profile and system prompt); the
        old one stays in the database, as the event store never deletes."""
        await self.aabort()
        old = self._session
        self._session = self.kairox.session(
            old.workspace_id, old.profile, system_prompt=old.system_prompt
        )
        self._last = None

    async def aabort(self) -> None:
        """Give up the turn in progress (its user message stays in the audit trail)."""
        turn, self._turn = self._turn, None
        self._calls.clear()
        self._said.clear()
        if turn is not None:
            await turn.abort()

    # --- reading ---------------------------------------------------------------------

    async def aget(
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        """Kairox's assembled context: the turn in progress's, else what a turn for
        ``input`` would see (without ``input`` itself)."""
        if self._turn is not None:
            return to_chat_messages(self._turn.messages)
        prompt = input if isinstance(input, str) else message_text(input) if input else ""
        context = await self._session.preview(prompt)
        messages = list(context.messages)
        if messages and messages[-1].get("role") == "user":
            messages.pop()  # the prompt itself: the caller has it
        return to_chat_messages(messages)

    async def aget_all(self) -> list[ChatMessage]:
        """Every message of the session as stored (replies cleaned of markup), oldest first."""
        out: list[ChatMessage] = []
        for event in self._session.events():
            if isinstance(event, UserMessageAdded):
                out.append(ChatMessage(role=MessageRole.USER, content=event.text))
            elif isinstance(event, ToolInvocationCompleted):
                call = {
                    "id": event.tool_call_id,
                    "type": "function",
                    "function": {"name": event.tool_name, "arguments": event.arguments},
                }
                out.append(to_chat_message({"role": "assistant", "tool_calls": [call]}))
                result = {"role": "tool", "tool_call_id": event.tool_call_id}
                out.append(to_chat_message({**result, "content": event.result}))
            elif isinstance(event, AssistantMessageCompleted):
                out.append(ChatMessage(role=MessageRole.ASSISTANT, content=event.text))
        return out

    # --- synchronous twins (Kairox's background loop) --------------------------------

    def get(self, input: str | ChatMessage | None = None, **kwargs: Any) -> list[ChatMessage]:
        return run_sync(self.aget(input, **kwargs))

    def get_all(self) -> list[ChatMessage]:
        return run_sync(self.aget_all())

    def put(self, message: ChatMessage) -> None:
        run_sync(self.aput(message))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        run_sync(self.aput_messages(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        run_sync(self.aset(messages))

    def reset(self) -> None:
        run_sync(self.areset())

    def abort(self) -> None:
        run_sync(self.aabort())

    def close(self) -> None:
        """Abort a turn in progress; close the ``Kairox`` if ``from_defaults`` opened it."""
        self.abort()
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def _signature(message: ChatMessage) -> tuple[str, str, tuple[str, ...]]:
    role = "assistant" if message.role in ASSISTANT_ROLES else message.role.value
    calls = tuple(c.name for c in tool_calls(message)) if role == "assistant" else ()
    return role, message_text(message).strip(), calls


def _clean_in_place(message: ChatMessage) -> None:
    """Remove ``<memory>`` markup from the reply the agent returns (the message object
    it handed over), as Kairox removed it from what it stored."""
    blocks: Sequence[Any] = message.blocks
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    visible = extract_memory_markers(text).visible
    if visible == text:
        return
    kept = [b for b in blocks if not isinstance(b, TextBlock)]
    message.blocks = [TextBlock(text=visible), *kept]
