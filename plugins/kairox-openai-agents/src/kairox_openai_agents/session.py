"""``KairoxSession``: the OpenAI Agents SDK's session protocol over a Kairox session.

``Runner.run(agent, input, session=KairoxSession(kx, "chat-1"))`` asks the session for
its items before each run and hands back what the run produced; here that becomes one
Kairox turn per run:

- ``get_items`` returns Kairox's assembled context as SDK input items. The SDK asks
  before it hands over the new input, so there is no question yet: the context holds
  the memories, packs, pinned facts, compaction summaries and history, and the room
  recall and retrieval would take goes to older messages, verbatim, newest first, as
  far back as the token budget reaches, past what compaction summarised (backfill.py).
  Recall, retrieval and the long-term block on the question itself come with
  ``RunConfig(call_model_input_filter=session.model_input_filter)``.
- ``add_items`` records: a user message begins a turn, function calls and their outputs
  become Kairox tool events (untrusted text), and an assistant message that ends a
  batch with no call left open completes the turn, which routes its ``<memory>``
  markers (session scope accepted, user and workspace scope pending approval) and runs
  the engines (compaction, recall indexing). An item Kairox cannot store is refused
  before anything of its batch is written.
- ``pop_item`` raises: Kairox's event log is append-only (the audit), so nothing is
  ever removed from it.
- ``clear_session`` starts a fresh Kairox session under the same SDK ``session_id``
  (Kairox id ``<session_id>::<n>``); the previous one stays whole in the database
  (``kx.events(old_id)``), user and workspace memories carry over, session memories do
  not.

Every Kairox call runs in a worker thread, the asynchronous ones through their
synchronous twins on Kairox's own loop, so ``Runner.run`` (your loop) and
``Runner.run_sync`` (a new loop per call) both work and the caller's loop never blocks
on the database.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.run_config import CallModelData, ModelInputData

from kairox_openai_agents.backfill import Backfill
from kairox_openai_agents.items import (
    AssistantText,
    KairoxSessionError,
    Op,
    ToolCall,
    ToolOutput,
    UserText,
    as_mapping,
    messages_to_items,
    parse_items,
)

if TYPE_CHECKING:
    from kairox_core import Kairox, Session, Turn, TurnResult

log = logging.getLogger(__name__)

GENERATION_SEP = "::"  # a Kairox session id may hold letters, digits and _ . : -


class KairoxSession:
    """An Agents SDK ``Session`` whose items are Kairox's context for the next turn.

    ``kx`` is an open ``Kairox``; ``session_id`` names the conversation (the Kairox
    session is created on first use, or resumed). ``workspace``, ``profile`` and
    ``system_prompt`` are those of ``kx.session(...)``. ``skip_item_types`` lists SDK
    item types (``"reasoning"``, ...) you accept to drop instead of getting an error.
    ``keep_summaries`` keeps compaction summaries in ``get_items``' context even when
    older messages, verbatim, could use their room (backfill.py).
    ``last_turn`` is the last completed turn's ``TurnResult``: the reply with its
    markup removed (``.text``) and the memory proposals it made (``.proposals``).
    """

    def __init__(
        self,
        kx: Kairox,
        session_id: str,
        *,
        workspace: str | None = None,
        profile: str | None = None,
        system_prompt: str | None = None,
        session_settings: SessionSettings | None = None,
        skip_item_types: Collection[str] = (),
        keep_summaries: bool = False,
    ) -> None:
        if not session_id or GENERATION_SEP in session_id:
            raise KairoxSessionError(
                f"session_id {session_id!r}: give a non-empty id without "
                f"{GENERATION_SEP!r} (KairoxSession uses it to number cleared sessions)"
            )
        self.kx = kx
        self.session_id = session_id
        self.session_settings = session_settings
        self.skip_item_types = frozenset(skip_item_types)
        self.last_turn: TurnResult | None = None
        self._profile = profile
        self._system_prompt = system_prompt
        self._lock = threading.Lock()
        self._turn: Turn | None = None
        self._calls: dict[str, ToolCall] = {}
        self._replied = False
        self._tool_results = 0
        self._last_piece: str | None = None  # the open turn's last user item's text
        self._kairox = kx.session(
            workspace=workspace,
            profile=profile,
            session_id=self._generation_id(self._current_generation()),
            system_prompt=system_prompt,
        )
        self._keep_summaries = keep_summaries
        self._backfill = Backfill(kx, self._kairox.id, keep_summaries=keep_summaries)

    def __repr__(self) -> str:
        return f"KairoxSession({self.session_id!r}, kairox={self.kairox_session_id!r})"

    @property
    def kairox_session(self) -> Session:
        """The Kairox session items go to now (a new one after ``clear_session``)."""
        return self._kairox

    @property
    def kairox_session_id(self) -> str:
        return self._kairox.id

    # --- the SDK's session protocol ----------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Kairox's assembled context for the next turn, as SDK input items, oldest
        first; ``limit`` (or ``session_settings.limit``) keeps the newest ``limit``."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = await asyncio.to_thread(self._context_items)
        if limit is not None and limit >= 0:  # negative: everything, as SQLiteSession
            items = items[max(0, len(items) - limit) :] if limit else []
        return cast(list[TResponseInputItem], items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record ``items`` as Kairox events (see the module docstring); nothing of the
        batch is written when one of its items cannot be stored."""
        ops = parse_items(items, skip_types=self.skip_item_types)
        if ops:
            await asyncio.to_thread(self._record, ops)

    async def pop_item(self) -> TResponseInputItem | None:
        """Always raises: Kairox keeps every message in its append-only audit log."""
        raise KairoxSessionError(
            f"pop_item cannot remove a message from Kairox session "
            f"{self.kairox_session_id}: its event log is append-only (the audit trail). "
            f"To take an exchange back, correct it in the next turn, or start over with "
            f"clear_session() (a fresh Kairox session; the old one stays readable)"
        )

    async def clear_session(self) -> None:
        """Start a fresh Kairox session under this ``session_id``; the previous one and
        its audit trail stay in the database. An unfinished turn is aborted first."""
        await asyncio.to_thread(self._clear)

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``RunConfig(call_model_input_filter=...)``: each model call of the run gets
        Kairox's context assembled for the input actually asked (recall, long-term
        block and retrieval on the question itself), then the run's own tool calls.
        Without it, the model gets ``get_items``' context, assembled with no question."""
        return await asyncio.to_thread(self._model_input, data.model_data)

    def _model_input(self, data: ModelInputData) -> ModelInputData:
        with self._lock:
            turn, piece = self._turn, self._last_piece
            if turn is None or piece is None:
                return data  # no turn of this session in progress: leave the input alone
            messages = turn.messages
        items = list(data.input)
        last_user = next((i for i in range(len(items) - 1, -1, -1) if _is_user(items[i])), None)
        if last_user is None or _user_text(items[last_user]) != piece:
            log.debug(
                "kairox session %s: model input has not this turn's prompt; left alone",
                self.kairox_session_id,
            )
            return data
        context = messages_to_items(messages)  # ends with the prompt, verbatim
        new = [*cast(list[TResponseInputItem], context), *items[last_user + 1 :]]
        return ModelInputData(input=new, instructions=data.instructions)

    # --- recording -----------------------------------------------------------------------

    def _context_items(self) -> list[dict[str, object]]:
        with self._lock:
            context = self._kairox.preview_sync("")
            messages = self._backfill.fill(context)
        return messages_to_items(messages[:-1])  # the SDK appends the prompt itself

    def _record(self, ops: Sequence[Op]) -> None:
        with self._lock:
            self._check(ops)
            pending: list[str] = []
            for op in ops:
                if isinstance(op, UserText):
                    pending.append(op.text)
                    continue
                self._flush_prompt(pending)
                turn = self._open_turn()
                if isinstance(op, ToolCall):
                    self._calls[op.call_id] = op
                elif isinstance(op, ToolOutput):
                    call = self._calls.pop(op.call_id)
                    turn.add_tool_result(call.call_id, call.name, call.arguments, op.output)
                    self._tool_results += 1
                else:
                    turn.feed(("\n\n" if self._replied else "") + op.text)
                    self._replied = True
            self._flush_prompt(pending)
            if isinstance(ops[-1], AssistantText) and not self._calls:
                self._finish()

    def _check(self, ops: Sequence[Op]) -> None:
        """Refuse a batch that does not fit the turn in progress, before writing."""
        open_turn = self._turn is not None
        calls = set(self._calls)
        for index, op in enumerate(ops):
            if isinstance(op, UserText):
                open_turn, calls = True, set()
            elif not open_turn:
                raise KairoxSessionError(
                    f"item #{index} ({type(op).__name__}) arrives with no user message "
                    f"before it in session {self.session_id}: a Kairox turn starts with one"
                )
            elif isinstance(op, ToolCall):
                calls.add(op.call_id)
            elif isinstance(op, ToolOutput) and op.call_id not in calls:
                raise KairoxSessionError(
                    f"item #{index}: output for call_id {op.call_id!r}, but this turn has "
                    f"no function call with that id (Kairox records a call and its result "
                    f"together)"
                )

    def _flush_prompt(self, pending: list[str]) -> None:
        """Consecutive user messages are one turn's prompt."""
        if not pending:
            return
        prompt = "\n\n".join(pending)
        self._last_piece = pending[-1]
        pending.clear()
        self._close_turn()
        self._turn = self._kairox.begin_turn_sync(prompt)

    def _open_turn(self) -> Turn:
        assert self._turn is not None, "checked by _check"
        return self._turn

    def _finish(self) -> None:
        turn = self._open_turn()
        self._reset()
        self.last_turn = turn.complete_sync()

    def _close_turn(self, *, abort: bool = False) -> None:
        """End a turn the SDK left open (a run that failed, or ended on a tool result):
        completed with what it recorded, or aborted when there is no reply and no tool
        result. A call with no output is not recorded (Kairox keeps the pair)."""
        turn = self._turn
        if turn is None:
            return
        for call in self._calls.values():
            log.warning(
                "kairox session %s: function call %s (%s) had no output when the turn "
                "ended; it is not recorded",
                self.kairox_session_id,
                call.call_id,
                call.name,
            )
        recorded = self._replied or self._tool_results > 0
        self._reset()
        if abort or not recorded:
            turn.abort_sync()
        else:
            self.last_turn = turn.complete_sync()

    def _reset(self) -> None:
        self._turn = None
        self._calls = {}
        self._replied = False
        self._tool_results = 0
        self._last_piece = None

    # --- generations (clear_session) -----------------------------------------------------

    def _generation_id(self, n: int) -> str:
        return self.session_id if n <= 1 else f"{self.session_id}{GENERATION_SEP}{n}"

    def _current_generation(self) -> int:
        pattern = re.compile(re.escape(self.session_id) + rf"(?:{GENERATION_SEP}(\d+))?")
        found = [
            int(m.group(1) or 1)
            for info in self.kx.sessions()
            if (m := pattern.fullmatch(info.session_id))
        ]
        return max(found, default=1)

    def _clear(self) -> None:
        with self._lock:
            self._close_turn(abort=True)
            n = self._current_generation() + 1
            self._kairox = self.kx.session(
                workspace=self._kairox.workspace_id,
                profile=self._profile,
                session_id=self._generation_id(n),
                system_prompt=self._system_prompt,
            )
            self._backfill = Backfill(self.kx, self._kairox.id, keep_summaries=self._keep_summaries)


def _is_user(item: object) -> bool:
    mapping = as_mapping(item)
    return mapping.get("role") == "user" and (mapping.get("type") or "message") == "message"


def _user_text(item: object) -> str | None:
    try:
        ops = parse_items([item])
    except KairoxSessionError:  # a part Kairox does not store: not this turn's prompt
        return None
    return ops[0].text if ops and isinstance(ops[0], UserText) else None
