"""``Turn``: one turn in flight, from the assembled context to the recorded reply.

``Session.begin_turn`` makes one; the model's stream goes through ``turn.feed(delta)``,
tool results through ``turn.add_tool_result(...)``, and ``await turn.complete()``
records the cleaned reply, routes the memory markers through the approval flow and
calls every engine's ``after_turn``. The turn holds its session's lock until it
completes or aborts. It knows its session through ``TurnOwner``, so this module sits
below ``kairox_core.session``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kairox_core.context.assembler import AssembledContext
from kairox_core.context.history import unit_from_event, with_tokens
from kairox_core.context.recalled import recalled_turns
from kairox_core.errors import KairoxError
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    MemoryProposed,
    ModelTokenDelta,
    ReplyFlagged,
    ToolInvocationCompleted,
)
from kairox_core.inputs import clean_text
from kairox_core.markers import (
    MarkerStreamParser,
    MemoryMarker,
    extract_memory_markers,
    is_tainted,
)
from kairox_core.memory.records import Proposal
from kairox_core.memory.scope_check import ScopeCheck, ScopeVerdict, applied
from kairox_core.results import TurnResult
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.sync_twins import twin

if TYPE_CHECKING:
    from kairox_core.context import ContextAssembler
    from kairox_core.context.contributions import Contribution
    from kairox_core.context.sources import HistoryUnit
    from kairox_core.context.trace import ContextTrace
    from kairox_core.session_services import SessionServices

# ModelTokenDelta batching: deltas are buffered and written as one event per batch, so a
# stream costs a few inserts, not one per token.
DELTA_BATCH_CHARS = 4096
DELTA_BATCH_COUNT = 256


# What decides a recorded reply's warning (``Turn.complete``'s ``flag``): from the
# reply's visible text, the markers it proposes and the proposals they raised.
ReplyFlag = Callable[[str, Sequence[MemoryMarker], Sequence[Proposal]], str]


class TurnOwner(Protocol):
    """What a turn uses of its session (``kairox_core.session.Session`` is one)."""

    id: str
    workspace_id: str
    services: SessionServices
    _lock: asyncio.Lock

    def assembler(self, profile: str | None = None) -> ContextAssembler: ...

    async def _assemble(
        self,
        prompt: str,
        *,
        attachments: Sequence[Mapping[str, Any]] = (),
        instructions: Sequence[str] = (),
        profile: str | None = None,
        before_seq: int | None = None,
        after_prompt: Sequence[HistoryUnit] = (),
        hits: Sequence[RetrievalHit] | None = None,
        contributions: Sequence[Contribution] | None = None,
    ) -> tuple[AssembledContext, list[RetrievalHit], list[Contribution]]: ...

    async def _after_turn(self, result: TurnResult) -> None: ...


def model_view(visible: str, markers: Sequence[MemoryMarker]) -> str | None:
    """The reply as the model will read it back in history: the visible text with the
    well-formed memory tags it wrote (None: no tags, the visible text as it is).

    Without them a model that reads its own past replies as "Noted." learns to answer
    "Noted." with no tag (issue 28). Malformed tags are left out, so it only ever sees
    the protocol written right; the tags are never parsed again (proposals come only
    from the model's new stream, and recall and compaction read the visible text)."""
    if not markers:
        return None
    tags = " ".join(m.raw for m in markers)
    return f"{visible.rstrip()} {tags}" if visible.strip() else tags


def without_history_tags(context: AssembledContext) -> AssembledContext:
    """``context`` with the memory tags taken out of the model's past replies (their
    visible text kept), for a turn answered again after the request check dropped its
    tags: the tags in history are what taught it "question -> Noted. and a tag". The
    trace keeps its counts (the messages only got shorter) and says what was done."""
    messages = []
    stripped = 0
    for message in context.messages:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and "<memory" in content:
            message = {**message, "content": extract_memory_markers(content).visible.strip()}
            stripped += 1
        messages.append(message)
    trace = context.trace
    trace.layer("history").notes.append(
        f"answered again with the memory tags left out of {stripped} past repl"
        f"{'y' if stripped == 1 else 'ies'} (request check)"
    )
    return AssembledContext(messages, trace)


class Turn:
    """One turn in flight. Not thread-safe; one task drives it."""

    def __init__(
        self,
        session: TurnOwner,
        turn_id: str,
        prompt: str,
        prompt_seq: int,
        context: AssembledContext,
        hits: list[RetrievalHit],
        *,
        contributions: Sequence[Contribution] = (),
        instructions: tuple[str, ...] = (),
        attachments: tuple[dict[str, Any], ...] = (),
    ) -> None:
        self.session = session
        self.turn_id = turn_id
        self.prompt = prompt
        self.prompt_seq = prompt_seq
        self.context = context
        self.hits = hits
        self.contributions = tuple(contributions)
        self.instructions = instructions
        self.attachments = attachments
        self.started = time.perf_counter()
        memory = session.services.config.memory
        self._parser = MarkerStreamParser(memory.max_body_chars, memory.max_proposals_per_turn)
        self._visible: list[str] = []
        self._pending: list[str] = []
        self._pending_chars = 0
        self._tool_events: list[ToolInvocationCompleted] = []
        self._done = False
        self.dropped: list[MemoryMarker] = []  # markers of a reply given up (``restart``)
        self._without_tags = False  # history read without memory tags (``restart``)

    @property
    def recalled(self) -> list[RetrievalHit]:
        """The engines' recalled past turns that can be in the context (a deferred
        search's settled hits included): untrusted text, like retrieval hits."""
        return recalled_turns(
            [h for c in self.contributions if c.layer == "recalled" for h in c.hits]
        )

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.context.messages

    @property
    def markers(self) -> list[MemoryMarker]:
        """The well-formed memory markers of the reply so far."""
        return list(self._parser.markers)

    def restart(self, *, history_tags: bool = True) -> list[MemoryMarker]:
        """Give up the reply streamed so far, to have the model answer again: its
        markers are never proposed (kept in ``dropped``, recorded on the reply's
        event), its text is not recorded (its deltas stay in the audit).
        ``history_tags`` False: the model reads its past replies without their memory
        tags from now on, a tool round's reassembly included."""
        self._check_open()
        self._flush_deltas()
        self._parser.finish()
        self.dropped += self._parser.markers
        memory = self.session.services.config.memory
        self._parser = MarkerStreamParser(memory.max_body_chars, memory.max_proposals_per_turn)
        self._visible = []
        if not history_tags and not self._without_tags:
            self._without_tags = True
            self.context = without_history_tags(self.context)
        return list(self.dropped)

    @property
    def trace(self) -> ContextTrace:
        return self.context.trace

    @property
    def done(self) -> bool:
        return self._done

    def feed(self, delta: str) -> str:
        """Take a piece of the model's stream; return what is safe to show now."""
        self._check_open()
        delta = clean_text(delta)  # a lone surrogate from the model: U+FFFD, never a crash
        self._pending.append(delta)
        self._pending_chars += len(delta)
        if self._pending_chars >= DELTA_BATCH_CHARS or len(self._pending) >= DELTA_BATCH_COUNT:
            self._flush_deltas()
        visible: str = self._parser.feed(delta)
        if visible:
            self._visible.append(visible)
        return visible

    def _delta_event(self) -> ModelTokenDelta | None:
        if not self._pending:
            return None
        event = ModelTokenDelta(
            session_id=self.session.id, turn_id=self.turn_id, delta="".join(self._pending)
        )
        self._pending.clear()
        self._pending_chars = 0
        return event

    def _flush_deltas(self) -> None:
        event = self._delta_event()
        if event is not None:
            self.session.services.events.append(event)

    def add_tool_result(
        self, tool_call_id: str, tool_name: str, arguments: str | Mapping[str, Any], result: str
    ) -> ToolInvocationCompleted:
        """Record a tool call and its result (history keeps or drops them together).
        The result is untrusted: it never yields memory proposals and taints any
        proposal whose body it contains."""
        import json

        self._check_open()
        args = (
            arguments
            if isinstance(arguments, str)
            else json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False)
        )
        counter = self.session.assembler().counter
        event = with_tokens(
            ToolInvocationCompleted(
                session_id=self.session.id,
                turn_id=self.turn_id,
                tool_call_id=tool_call_id,
                tool_name=clean_text(tool_name),
                arguments=clean_text(args),
                result=clean_text(str(result)),
            ),
            counter,
        )
        batch = [e for e in (self._delta_event(), event) if e is not None]
        stored = self.session.services.events.append_many(batch)[-1]
        assert isinstance(stored, ToolInvocationCompleted)
        self._tool_events.append(stored)
        return stored

    async def reassemble(self) -> AssembledContext:
        """The context again, with this turn's tool calls and results after the prompt:
        for the model call that follows a tool call. Updates ``messages``/``trace``."""
        self._check_open()
        session = self.session
        counter = session.assembler().counter
        tail = [
            u for u in (unit_from_event(e, counter) for e in self._tool_events) if u is not None
        ]
        context, _, _ = await session._assemble(
            self.prompt,
            attachments=self.attachments,
            instructions=self.instructions,
            before_seq=self.prompt_seq,
            after_prompt=tail,
            hits=self.hits,
            contributions=self.contributions,
        )
        self.context = without_history_tags(context) if self._without_tags else context
        return self.context

    async def complete(
        self,
        text: str | None = None,
        *,
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, int] | None = None,
        scope_check: ScopeCheck | None = None,
        drop_markers: str | None = None,
        replace_markers: Sequence[MemoryMarker] = (),
        replaced_because: str = "",
        flag: ReplyFlag | None = None,
    ) -> TurnResult:
        """Record the reply and route its memory markers; then the turn-end hooks.

        ``text``: the whole raw reply, for a model that did not stream (it goes through
        the same parser as ``feed``). ``scope_check``: asked about each marker's scope
        before it is routed (``kairox_core.memory.scope_check``); its verdicts ride on
        the ``MemoryProposed`` events and in ``TurnResult.scope_checks``.
        ``drop_markers``: why this reply's markers are left out (never proposed nor
        read back in history); they and those of a reply given up (``restart``) are
        recorded on the reply's event (``dropped_tags``) and in ``TurnResult.dropped``.
        ``replace_markers``: markers proposed (and read back) instead of the reply's
        (``kairox_core.memory.restate``); the reply's are recorded as dropped, with
        ``replaced_because``. ``flag``: the warning to record under the reply (a
        ``ReplyFlagged`` event in the same write as the reply, in
        ``TurnResult.flagged``), given its text, its markers and the proposals they
        raised; "" for none."""
        self._check_open()
        session = self.session
        services = session.services
        try:
            if text is not None:
                self.feed(text)
            tail = self._parser.finish()
            if tail:
                self._visible.append(tail)
            visible = "".join(self._visible)
            markers = list(self._parser.markers)
            invalid = list(self._parser.invalid)
            dropped = [*self.dropped, *(markers if drop_markers or replace_markers else [])]
            because = drop_markers or ("markers of a reply given up" if dropped else "")
            if drop_markers:
                markers = []
            elif replace_markers:
                markers = list(replace_markers)
                because = replaced_because or "replaced"  # said even when none was written
            verdicts = [await scope_check(m) for m in markers] if scope_check else []
            counter = session.assembler().counter
            reply = with_tokens(
                AssistantMessageCompleted(
                    session_id=session.id,
                    turn_id=self.turn_id,
                    text=visible,
                    model_text=(
                        model_view(visible, markers)
                        if services.config.memory.history_tags
                        else None
                    ),
                    model=model,
                    provider=provider,
                    usage=dict(usage) if usage else None,
                    dropped_tags=[m.raw for m in dropped] or None,
                    dropped_because=because or None,
                ),
                counter,
            )
            batch = [e for e in (self._delta_event(), reply) if e is not None]
            proposals: list[Proposal] = []
            memory_events: list[Event] = []
            recalled = self.recalled
            with services.storage.atomic():
                stored = services.events.append_many(batch)[-1]
                if markers:
                    untrusted = [e.result for e in self._tool_events]
                    untrusted += [h.text for h in (*self.hits, *recalled)]
                    proposals, memory_events = self._route(markers, untrusted, verdicts)
                note = flag(visible, markers, proposals) if flag is not None else ""
                if note:
                    services.events.append(
                        ReplyFlagged(session_id=session.id, turn_id=self.turn_id, note=note)
                    )
            result = TurnResult(
                turn_id=self.turn_id,
                text=visible,
                assistant_seq=stored.seq or 0,
                markers=markers,
                invalid=invalid,
                proposals=proposals,
                tool_results=len(self._tool_events),
                memory_events=memory_events,
                recalled=recalled,
                scope_checks=verdicts,
                dropped=dropped,
                dropped_because=because,
                flagged=note,
            )
            self._done = True
            await session._after_turn(result)
            return result
        finally:
            self._release()

    def _route(
        self,
        markers: Sequence[MemoryMarker],
        untrusted: Sequence[str],
        verdicts: Sequence[ScopeVerdict] = (),
    ) -> tuple[list[Proposal], list[Event]]:
        """The proposals the markers made (a marker that would change nothing makes
        none), each with its status as the turn ends, and the events they recorded.
        A scope check's verdict changes the scope only (taint is the body's)."""
        session = self.session
        proposals: list[Proposal] = []
        events: list[Event] = []
        for i, marker in enumerate(markers):
            verdict = verdicts[i] if i < len(verdicts) else None
            proposal, recorded = session.services.approvals.route(
                session.id,
                session.workspace_id,
                self.turn_id,
                applied(marker, verdict) if verdict else marker,
                tainted=is_tainted(marker.body, untrusted),
                scope_check=verdict,
            )
            if proposal is not None:
                proposals.append(proposal)
                events.extend(recorded)
        replaced = {
            e.supersedes: e.proposal_id
            for e in events
            if isinstance(e, MemoryProposed) and e.supersedes is not None
        }
        return [_superseded(p, replaced.get(p.id)) for p in proposals], events

    complete_sync = twin(complete)

    async def abort(self) -> None:
        """Give up the turn without a reply (the user message stays in the audit)."""
        if self._done:
            return
        try:
            self._flush_deltas()
        finally:
            self._done = True
            self._release()

    abort_sync = twin(abort)

    async def __aenter__(self) -> Turn:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self._done:
            if exc_type is None:
                await self.complete()
            else:
                await self.abort()

    def _check_open(self) -> None:
        if self._done:
            raise KairoxError(f"turn {self.turn_id} is already complete")

    def _release(self) -> None:
        self._done = True
        lock = self.session._lock
        if lock.locked():
            lock.release()


def _superseded(proposal: Proposal, by: str | None) -> Proposal:
    """``proposal`` as a later marker of the same turn left it (``by``: its successor)."""
    if by is None:
        return proposal
    return dataclasses.replace(proposal, status="superseded", superseded_by=by)
