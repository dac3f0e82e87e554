"""Sessions and turns: what an application drives, one turn at a time per session.

``turn = await session.begin_turn(prompt)`` assembles the context (``turn.messages``,
``turn.trace``) and records the user message; the model's stream goes through
``turn.feed(delta)``, which returns the text safe to show (``<memory>`` markup removed);
tool results enter with ``turn.add_tool_result(...)``; ``await turn.complete()`` records
the cleaned reply, routes the memory markers through the approval flow and then calls
every engine's ``after_turn`` (kairox_core/engines.py: where the compaction check plugs
in). A per-session lock makes turns, compaction, edits and profile switches of one
session run strictly one after another; engines are called with the session held.

Synchronous twins (``begin_turn_sync``, ``complete_sync``, ``abort_sync``,
``run_turn_sync``, ``preview_sync``, ``compact_sync``, pin/edit/drop) serve scripts, the
CLI and notebooks: they run the async method on Kairox's one background loop
(kairox_core/sync.py), so they also work inside a running event loop. Drive one session
either through the twins or from your own loop, not both at once (its lock and
retriever client live on the loop that first used them).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox_core.context import (
    AssembledContext,
    CompactionState,
    ContextAssembler,
    MemoryItem,
    edits,
)
from kairox_core.context.assembler import AssemblyInputs
from kairox_core.context.history import HistoryCache, unit_from_event, with_tokens
from kairox_core.context.recalled import recalled_turns, search_deferred
from kairox_core.context.sources import HistoryUnit, SummaryItem
from kairox_core.engines import (
    AssemblyRequest,
    CompactionResult,
    Contribution,
)
from kairox_core.errors import KairoxError, KairoxUserError
from kairox_core.events import (
    AssistantMessageCompleted,
    ChunkDropped,
    Event,
    FactPinned,
    FactUnpinned,
    ModelTokenDelta,
    ProfileSwitched,
    SummaryEdited,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.inputs import InvalidInputError, check_text, clean_text, json_problem
from kairox_core.markers import InvalidMarker, MarkerStreamParser, MemoryMarker, is_tainted
from kairox_core.memory.records import Proposal
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
from kairox_core.store.leases import HOST
from kairox_core.sync import run_sync

if TYPE_CHECKING:
    from kairox_core.facade import Kairox


# ModelTokenDelta batching: deltas are buffered and written as one event per batch, so a
# stream costs a few inserts, not one per token.
DELTA_BATCH_CHARS = 4096
DELTA_BATCH_COUNT = 256


class TurnInProgress(KairoxUserError):
    """A synchronous call found the session busy with an unfinished turn."""


class NoCompactionStrategy(KairoxError):
    """``compact`` was asked for, but no compaction engine is installed."""


@dataclass
class TurnResult:
    """What ``complete()`` recorded: the cleaned reply, markers and their proposals."""

    turn_id: str
    text: str
    assistant_seq: int
    markers: list[MemoryMarker] = field(default_factory=list)
    invalid: list[InvalidMarker] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    tool_results: int = 0


class Session:
    """A handle on one session. Get it from ``Kairox.session(...)``.

    The session owns its compaction state (summaries, pins, edits, drops: core state,
    folded from the event store) and calls the ``Kairox``'s engines at fixed points
    (kairox_core/engines.py), always with its lock held.
    """

    def __init__(
        self,
        kx: Kairox,
        session_id: str,
        *,
        workspace_id: str,
        profile: str,
        system_prompt: str | None = None,
    ) -> None:
        self.kx = kx
        self.id = session_id
        self.workspace_id = workspace_id
        self.profile = profile
        self.system_prompt = system_prompt
        self.compaction = CompactionState()
        self._history = HistoryCache(kx.events_store, session_id)
        self._lock = asyncio.Lock()
        self._retriever: CompositeWorkspaceRetriever | None = None
        self._retriever_profile: str | None = None

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, workspace={self.workspace_id!r}, profile={self.profile!r})"

    @property
    def busy(self) -> bool:
        """True while a turn, compaction or profile switch holds the session."""
        return self._lock.locked()

    # --- assembly --------------------------------------------------------------------

    def assembler(self, profile: str | None = None) -> ContextAssembler:
        return ContextAssembler.from_config(self.kx.config, profile or self.profile)

    def memories(self) -> list[MemoryItem]:
        """Approved memories for this turn: user, this workspace's, this session's."""
        records = self.kx.memories.list(None, workspace_id=self.workspace_id, session_id=self.id)
        return [MemoryItem.from_record(r) for r in records]

    def refresh_compaction(self) -> CompactionState:
        """Fold compaction events newer than the last seen (cheap: indexed by type)."""
        return edits.refresh(self.kx.events_store, self.id, self.compaction)

    def active_summary(self, summary_seq: int) -> SummaryItem:
        """The active summary stored at ``summary_seq``; a clear error otherwise."""
        return edits.active_summary(self.kx.events_store, self.id, self.compaction, summary_seq)

    def history_tokens(self, limit: int | None = None, *, profile: str | None = None) -> int:
        """What the next turn's history costs: pinned facts, active summaries and the
        history they do not replace, from stored counts and the session's history cache
        (so a turn-end compaction check reads only what was appended since). Stops
        counting once past ``limit``. Summary and pin framing is approximate (block
        headers), history is exact."""
        from kairox_core.context.rendering import item_unit, pinned_header, summary_header

        state = self.refresh_compaction()
        counter = self.assembler(profile).counter
        total = sum(
            counter.raw_count(item_unit(pinned_header(f.fact_id), f.text)) for f in state.pinned
        )
        total += sum(
            counter.raw_count(
                item_unit(summary_header(s.seq, s.first_seq, s.last_seq), s.text.strip())
            )
            for s in state.summaries
        )
        history = self._history.source(counter, skip=state.covered_ranges())
        if limit is None:
            return total + sum(unit.tokens for unit in history)
        # what adding units newest first until past ``limit`` gives, from the running sums
        taken, over = history.within(limit - total)
        return total + sum(u.tokens for u in taken) + (over.tokens if over is not None else 0)

    async def retrieve(self, prompt: str, profile: str | None = None) -> tuple[list[Any], Any]:
        """Hits for ``prompt`` from the profile's composite retriever, and its report."""
        name = profile or self.profile
        if not prompt.strip():
            return [], None
        if self._retriever is None or self._retriever_profile != name:
            if self._retriever is not None:
                await self._retriever.close()
            self._retriever = self.kx.retriever_for(name, self.workspace_id)
            self._retriever_profile = name
        if self._retriever is None:
            return [], None
        result = await self._retriever.search(prompt, self.kx.config.retrieval.k)
        return list(result.hits), result

    async def _assemble(
        self,
        prompt: str,
        *,
        attachments: Sequence[Mapping[str, Any]] = (),
        instructions: Sequence[str] = (),
        profile: str | None = None,
        before_seq: int | None = None,
        after_prompt: Sequence[HistoryUnit] = (),
        hits: Sequence[Any] | None = None,
        contributions: Sequence[Contribution] | None = None,
    ) -> tuple[AssembledContext, list[Any], list[Contribution]]:
        """The context for ``prompt``; ``hits``/``contributions`` (None: search now,
        ask the engines now) are the retrieval hits and the engines' contributions
        (recalled past turns among them), also returned."""
        assembler = self.assembler(profile)
        report = None
        if hits is None:
            hits, report = await self.retrieve(prompt, profile)
        if contributions is None:  # engines: before assembly
            request = AssemblyRequest(prompt, profile or self.profile, before_seq)
            contributions = await self._before_assembly(request)
        state = self.refresh_compaction()
        history = self._history.source(
            assembler.counter, before_seq=before_seq, skip=state.covered_ranges()
        )
        system = self.system_prompt or self.kx.config.kairox.system_prompt
        inputs: AssemblyInputs = {
            "system_prompt": system,
            "instructions": instructions,
            "memories": self.memories(),
            "pinned": state.pinned,
            "summaries": state.summaries,
            "hits": list(hits),
            "history": history,
            "attachments": attachments,
            "after_prompt": after_prompt,
            "contributions": [c for c in contributions if c.longterm is None],
            "longterm": next((c.longterm for c in contributions if c.longterm), None),
        }
        plan = assembler.plan(prompt, **inputs)
        if plan.unsettled:  # recall skipped unindexed turns the history lacks: search again
            await search_deferred(plan.unsettled)  # off the event loop
            plan = assembler.plan(prompt, **inputs)
        context = assembler.render(plan)
        self._history.trim(2 * assembler.budget)
        if report is not None:
            layer = context.trace.layer("retrieval")
            for src in report.sources:
                if not src.ok:
                    layer.notes.append(f"source {src.name} failed: {src.error}")
        return context, list(hits), list(contributions)

    async def _before_assembly(self, request: AssemblyRequest) -> list[Contribution]:
        out: list[Contribution] = []
        for engine in self.kx.engines:
            out.extend(await engine.before_assembly(self, request))
        return out

    async def preview(
        self,
        prompt: str = "",
        *,
        profile: str | None = None,
        attachments: Sequence[Mapping[str, Any]] = (),
    ) -> AssembledContext:
        """What the next turn would send for ``prompt``; writes nothing."""
        context, _, _ = await self._assemble(prompt, attachments=attachments, profile=profile)
        return context

    def preview_sync(self, prompt: str = "", *, profile: str | None = None) -> AssembledContext:
        return run_sync(self.preview(prompt, profile=profile))

    # --- turns -----------------------------------------------------------------------

    async def begin_turn(
        self,
        prompt: str,
        attachments: Sequence[Mapping[str, Any]] | None = None,
        *,
        instructions: Sequence[str] = (),
        hits: Sequence[Any] | None = None,
    ) -> Turn:
        """Assemble the context and record the user message; the session stays locked
        until ``complete()`` or ``abort()``. Raises ``ContextBudgetExceeded`` (and
        records nothing) when the mandatory parts do not fit. ``hits`` replaces the
        session's own retrieval (an application that retrieves by itself)."""
        check_text(prompt, "the prompt")
        atts = tuple(dict(a) for a in attachments or ())
        problem = json_problem(list(atts), "attachments")
        if problem is not None:
            raise InvalidInputError(problem)
        await self._lock.acquire()
        try:
            atts = await self._with_synopses(atts)
            context, used_hits, contributions = await self._assemble(
                prompt, attachments=atts, instructions=instructions, hits=hits
            )
            turn_id = f"t-{uuid.uuid4().hex[:12]}"
            counter = self.assembler().counter
            event = with_tokens(
                UserMessageAdded(
                    session_id=self.id,
                    turn_id=turn_id,
                    text=prompt,
                    attachments=atts,
                    writer_pid=os.getpid(),  # an interrupted turn is told by its writer
                    writer_host=HOST,
                ),
                counter,
            )
            stored = self.kx.events_store.append(event)
        except BaseException:
            self._lock.release()
            raise
        return Turn(
            self,
            turn_id,
            prompt,
            stored.seq or 0,
            context,
            used_hits,
            contributions=contributions,
            instructions=tuple(instructions),
            attachments=atts,
        )

    async def _with_synopses(self, atts: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        """The attachments, each long document with the synopsis older turns and
        summaries carry (``SynopsisWriter``, the compaction engine's), written once,
        now: the stored message then renders the same in every later turn."""
        writer = self.kx.synopsis_writer
        if writer is None:
            return atts
        out = []
        for att in atts:
            if att.get("kind") == "document" and "synopsis" not in att:
                extra = await writer.synopsis(self, att)
                att = {**att, **extra} if extra else att
            out.append(att)
        return tuple(out)

    def begin_turn_sync(
        self, prompt: str, attachments: Sequence[Mapping[str, Any]] | None = None, **kw: Any
    ) -> Turn:
        self._check_idle()
        return run_sync(self.begin_turn(prompt, attachments, **kw))

    async def run_turn(
        self,
        prompt: str,
        reply: str,
        *,
        tool_results: Sequence[Mapping[str, str]] = (),
        attachments: Sequence[Mapping[str, Any]] | None = None,
    ) -> TurnResult:
        """A whole turn in one call: begin, record tool results, complete with ``reply``
        (the raw model output, markers included). ``tool_results`` items have the keys
        ``tool_call_id``, ``tool_name``, ``arguments`` and ``result``."""
        turn = await self.begin_turn(prompt, attachments)
        async with turn:  # an error or a cancellation aborts the turn: the session is free
            for tr in tool_results:
                turn.add_tool_result(
                    tr["tool_call_id"], tr["tool_name"], tr.get("arguments", "{}"), tr["result"]
                )
            return await turn.complete(reply)

    def run_turn_sync(
        self,
        prompt: str,
        reply: str,
        *,
        tool_results: Sequence[Mapping[str, str]] = (),
        attachments: Sequence[Mapping[str, Any]] | None = None,
    ) -> TurnResult:
        """Synchronous ``run_turn``: for scripts, tests and replaying transcripts."""
        self._check_idle()
        return run_sync(
            self.run_turn(prompt, reply, tool_results=tool_results, attachments=attachments)
        )

    def _check_idle(self) -> None:
        if self._lock.locked():
            raise TurnInProgress(
                f"session {self.id} has a turn in progress; complete() or abort() it first"
            )

    # --- compaction (served by the compaction engine), edits and profile switches -----

    async def compact(
        self, first_seq: int | None = None, last_seq: int | None = None
    ) -> CompactionResult:
        """Compact the session's history (a seq range, or the engine's choice)."""
        async with self._lock:
            return await self.compact_locked(first_seq, last_seq, trigger="manual")

    async def compact_locked(
        self,
        first_seq: int | None = None,
        last_seq: int | None = None,
        *,
        trigger: str = "auto",
    ) -> CompactionResult:
        """``compact`` for a caller that already holds the session: an engine's
        ``after_turn`` (the lock is not re-entrant, so an engine must not call
        ``compact``). A completed compaction is handed to every engine's
        ``on_compacted``; one that raises leaves a note on the result."""
        engine = self.kx.compaction_engine
        if engine is None:
            raise NoCompactionStrategy(
                "no compaction strategy available: install or enable a compaction engine "
                "([compaction] in kairox.toml) before compacting"
            )
        result = await engine.compact(self, first_seq=first_seq, last_seq=last_seq, trigger=trigger)
        if result.ok:
            for other in self.kx.engines:
                try:
                    await other.on_compacted(self, result)
                except Exception as exc:  # an engine never undoes a compaction
                    name = getattr(other, "name", type(other).__name__)
                    result.notes.append(
                        f"on_compacted of engine {name} failed: {type(exc).__name__}: {exc}"
                    )
        return result

    # pin / edit / drop: one event each, queued behind any turn or compaction in flight

    async def pin_fact(self, text: str, *, source_seq: int | None = None) -> FactPinned:
        """Pin ``text``: included verbatim in every later turn, whatever compaction does."""
        async with self._lock:
            return edits.pin_fact(
                self.kx.events_store, self.id, self.compaction, text, source_seq=source_seq
            )

    async def unpin_fact(self, fact_id: str) -> FactUnpinned:
        """Release a pinned fact: later turns no longer include it."""
        async with self._lock:
            return edits.unpin_fact(self.kx.events_store, self.id, self.compaction, fact_id)

    async def edit_summary(self, summary_seq: int, text: str) -> SummaryEdited:
        """Replace an active summary's text (the original stays in the audit trail)."""
        async with self._lock:
            return edits.edit_summary(
                self.kx.events_store, self.id, self.compaction, summary_seq, text
            )

    async def drop_chunk(self, summary_seq: int, chunk_index: int) -> ChunkDropped:
        """Drop one chunk (line) of an active summary from what later turns see."""
        async with self._lock:
            return edits.drop_chunk(
                self.kx.events_store, self.id, self.compaction, summary_seq, chunk_index
            )

    async def archive(self, *, reason: str | None = None) -> int:
        """End the session: ``SessionArchived`` is appended and its session memories are
        discarded; its events stay (nothing is ever deleted) and pending user/workspace
        proposals stay pending. Waits for any turn or compaction in flight. Returns how
        many session memories were discarded."""
        async with self._lock:
            return self.kx.approvals.archive_session(self.id, reason=reason)

    def pin_fact_sync(self, text: str, *, source_seq: int | None = None) -> FactPinned:
        self._check_idle()
        return run_sync(self.pin_fact(text, source_seq=source_seq))

    def unpin_fact_sync(self, fact_id: str) -> FactUnpinned:
        self._check_idle()
        return run_sync(self.unpin_fact(fact_id))

    def edit_summary_sync(self, summary_seq: int, text: str) -> SummaryEdited:
        self._check_idle()
        return run_sync(self.edit_summary(summary_seq, text))

    def drop_chunk_sync(self, summary_seq: int, chunk_index: int) -> ChunkDropped:
        self._check_idle()
        return run_sync(self.drop_chunk(summary_seq, chunk_index))

    def archive_sync(self, *, reason: str | None = None) -> int:
        self._check_idle()
        return run_sync(self.archive(reason=reason))

    def compact_sync(
        self, first_seq: int | None = None, last_seq: int | None = None
    ) -> CompactionResult:
        self._check_idle()
        return run_sync(self.compact(first_seq, last_seq))

    async def switch_profile(self, profile: str) -> None:
        """Switch the session's profile; waits for any turn or compaction in flight."""
        async with self._lock:
            self._switch(profile)

    def switch_profile_sync(self, profile: str) -> None:
        self._check_idle()
        self._switch(profile)

    def _switch(self, profile: str) -> None:
        name, _ = self.kx.config.resolve_profile(profile)
        if name == self.profile:
            return
        self.kx.events_store.append(
            ProfileSwitched(session_id=self.id, from_profile=self.profile, to_profile=name)
        )
        self.profile = name

    async def _after_turn(self, result: TurnResult) -> None:
        """Engines after a turn: each in order, the session still locked."""
        for engine in self.kx.engines:
            await engine.after_turn(self, result)

    def events(self) -> list[Event]:
        return self.kx.events_store.read(self.id)


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


class Turn:
    """One turn in flight. Not thread-safe; one task drives it."""

    def __init__(
        self,
        session: Session,
        turn_id: str,
        prompt: str,
        prompt_seq: int,
        context: AssembledContext,
        hits: list[Any],
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
        memory = session.kx.config.memory
        self._parser = MarkerStreamParser(memory.max_body_chars, memory.max_proposals_per_turn)
        self._visible: list[str] = []
        self._pending: list[str] = []
        self._pending_chars = 0
        self._tool_events: list[ToolInvocationCompleted] = []
        self._done = False

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
    def trace(self) -> Any:
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
            self.session.kx.events_store.append(event)

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
        stored = self.session.kx.events_store.append_many(batch)[-1]
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
        self.context = context
        return context

    async def complete(
        self,
        text: str | None = None,
        *,
        model: str | None = None,
        provider: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> TurnResult:
        """Record the reply and route its memory markers; then the turn-end hooks.

        ``text``: the whole raw reply, for a model that did not stream (it goes through
        the same parser as ``feed``)."""
        self._check_open()
        session = self.session
        kx = session.kx
        try:
            if text is not None:
                self.feed(text)
            tail = self._parser.finish()
            if tail:
                self._visible.append(tail)
            visible = "".join(self._visible)
            markers = list(self._parser.markers)
            invalid = list(self._parser.invalid)
            counter = session.assembler().counter
            reply = with_tokens(
                AssistantMessageCompleted(
                    session_id=session.id,
                    turn_id=self.turn_id,
                    text=visible,
                    model_text=(
                        model_view(visible, markers) if kx.config.memory.history_tags else None
                    ),
                    model=model,
                    provider=provider,
                    usage=dict(usage) if usage else None,
                ),
                counter,
            )
            batch = [e for e in (self._delta_event(), reply) if e is not None]
            proposals: list[Proposal] = []
            with kx.storage.atomic():
                stored = kx.events_store.append_many(batch)[-1]
                if markers:
                    untrusted = [e.result for e in self._tool_events]
                    untrusted += [getattr(h, "text", "") for h in (*self.hits, *self.recalled)]
                    proposals = self._route(markers, untrusted)
            result = TurnResult(
                turn_id=self.turn_id,
                text=visible,
                assistant_seq=stored.seq or 0,
                markers=markers,
                invalid=invalid,
                proposals=proposals,
                tool_results=len(self._tool_events),
            )
            self._done = True
            await session._after_turn(result)
            return result
        finally:
            self._release()

    def _route(self, markers: Sequence[MemoryMarker], untrusted: Sequence[str]) -> list[Proposal]:
        session = self.session
        proposals = [
            session.kx.approvals.propose(
                session.id,
                session.workspace_id,
                self.turn_id,
                marker,
                tainted=is_tainted(marker.body, untrusted),
            )
            for marker in markers
        ]
        return [p for p in proposals if p is not None]  # None: it would change nothing

    def complete_sync(self, text: str | None = None, **kw: Any) -> TurnResult:
        return run_sync(self.complete(text, **kw))

    async def abort(self) -> None:
        """Give up the turn without a reply (the user message stays in the audit)."""
        if self._done:
            return
        try:
            self._flush_deltas()
        finally:
            self._done = True
            self._release()

    def abort_sync(self) -> None:
        run_sync(self.abort())

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
