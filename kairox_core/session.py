"""Sessions: what an application drives, one turn at a time per session.

``turn = await session.begin_turn(prompt)`` assembles the context (``turn.messages``,
``turn.trace``) and records the user message; the ``Turn`` (kairox_core/turn.py) takes
the model's stream, tool results and ``complete()``, which routes the memory markers
through the approval flow and then calls every engine's ``after_turn``
(kairox_core/engines.py: where the compaction check plugs in). A per-session lock makes
turns, compaction, edits and profile switches of one session run strictly one after
another; engines are called with the session held. A session gets what it uses of the
``Kairox`` as ``SessionServices`` (kairox_core/session_services.py), never the
``Kairox`` itself.

Synchronous twins (``begin_turn_sync``, ``run_turn_sync``, ``preview_sync``,
``compact_sync``, pin/edit/drop, ``archive_sync``; kairox_core/sync_twins.py) serve
scripts, the CLI and notebooks: they run the async method on Kairox's one background
loop (kairox_core/sync.py), so they also work inside a running event loop. Drive one
session either through the twins or from your own loop, not both at once (its lock and
retriever client live on the loop that first used them).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kairox_core.context import (
    AssembledContext,
    CompactionState,
    ContextAssembler,
    MemoryItem,
    edits,
)
from kairox_core.context.assembler import AssemblyInputs
from kairox_core.context.contributions import AssemblyRequest, Contribution
from kairox_core.context.history import HistoryCache, with_tokens
from kairox_core.context.recalled import search_deferred
from kairox_core.context.sources import HistoryUnit, SummaryItem
from kairox_core.errors import KairoxError, KairoxUserError
from kairox_core.events import (
    ChunkDropped,
    Event,
    FactPinned,
    FactUnpinned,
    ProfileSwitched,
    SummaryEdited,
    UserMessageAdded,
)
from kairox_core.inputs import InvalidInputError, check_text, json_problem
from kairox_core.memory.decided import REJECTED_NOTE, DecidedReplies
from kairox_core.results import CompactionResult, TurnResult
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.composite import CompositeResult, CompositeWorkspaceRetriever
from kairox_core.session_services import SessionServices
from kairox_core.store.leases import HOST
from kairox_core.sync_twins import idle_twin, twin
from kairox_core.turn import DELTA_BATCH_CHARS, DELTA_BATCH_COUNT, Turn, model_view


def _reply_view(services: SessionServices) -> DecidedReplies | None:
    """How the model reads back its tagged replies: as decided with ``[memory]
    history_decided`` (kairox_core/memory/decided.py), else as it wrote them."""
    memory = services.config.memory
    if not (memory.history_tags and memory.history_decided):
        return None
    rejected = REJECTED_NOTE if memory.history_rejected == "note" else ""
    return DecidedReplies(services.approvals.store, services.memories, rejected)


class TurnInProgress(KairoxUserError):
    """A synchronous call found the session busy with an unfinished turn."""


class NoCompactionStrategy(KairoxError):
    """``compact`` was asked for, but no compaction engine is installed."""


class Session:
    """A handle on one session. Get it from ``Kairox.session(...)``.

    The session owns its compaction state (summaries, pins, edits, drops: core state,
    folded from the event store) and calls the engines of its ``services`` at fixed
    points (kairox_core/engines.py), always with its lock held.
    """

    def __init__(
        self,
        services: SessionServices,
        session_id: str,
        *,
        workspace_id: str,
        profile: str,
        system_prompt: str | None = None,
    ) -> None:
        self.services = services
        self.id = session_id
        self.workspace_id = workspace_id
        self.profile = profile
        self.system_prompt = system_prompt
        self.compaction = CompactionState()
        self._history = HistoryCache(services.events, session_id, _reply_view(services))
        self._lock = asyncio.Lock()
        self._compactions: list[CompactionResult] | None = None  # a turn end's, collected
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
        return ContextAssembler.from_config(self.services.config, profile or self.profile)

    def memories(self) -> list[MemoryItem]:
        """Approved memories for this turn: user, this workspace's, this session's."""
        records = self.services.memories.list(
            None, workspace_id=self.workspace_id, session_id=self.id
        )
        return [MemoryItem.from_record(r) for r in records]

    def refresh_compaction(self) -> CompactionState:
        """Fold compaction events newer than the last seen (cheap: indexed by type)."""
        return edits.refresh(self.services.events, self.id, self.compaction)

    def active_summary(self, summary_seq: int) -> SummaryItem:
        """The active summary stored at ``summary_seq``; a clear error otherwise."""
        return edits.active_summary(self.services.events, self.id, self.compaction, summary_seq)

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

    async def retrieve(
        self, prompt: str, profile: str | None = None
    ) -> tuple[list[RetrievalHit], CompositeResult | None]:
        """Hits for ``prompt`` from the profile's composite retriever, and its report."""
        name = profile or self.profile
        if not prompt.strip():
            return [], None
        if self._retriever is None or self._retriever_profile != name:
            if self._retriever is not None:
                await self._retriever.close()
            self._retriever = self.services.retriever_for(name, self.workspace_id)
            self._retriever_profile = name
        if self._retriever is None:
            return [], None
        result = await self._retriever.search(prompt, self.services.config.retrieval.k)
        return list(result.hits), result

    def detach_retriever(self) -> CompositeWorkspaceRetriever | None:
        """The session's retriever, which it no longer holds (its owner closes it)."""
        retriever, self._retriever = self._retriever, None
        return retriever

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
    ) -> tuple[AssembledContext, list[RetrievalHit], list[Contribution]]:
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
        system = self.system_prompt or self.services.config.kairox.system_prompt
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
        for engine in self.services.engines:
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

    preview_sync = twin(preview)  # takes no lock: works beside a turn in flight

    # --- turns -----------------------------------------------------------------------

    async def begin_turn(
        self,
        prompt: str,
        attachments: Sequence[Mapping[str, Any]] | None = None,
        *,
        instructions: Sequence[str] = (),
        hits: Sequence[RetrievalHit] | None = None,
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
            stored = self.services.events.append(event)
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
        writer = self.services.synopsis_writer
        if writer is None:
            return atts
        out = []
        for att in atts:
            if att.get("kind") == "document" and "synopsis" not in att:
                extra = await writer.synopsis(self, att)
                att = {**att, **extra} if extra else att
            out.append(att)
        return tuple(out)

    begin_turn_sync = idle_twin(begin_turn)

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

    run_turn_sync = idle_twin(run_turn)  # scripts, tests and replaying transcripts

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
        engine = self.services.compaction_engine
        if engine is None:
            raise NoCompactionStrategy(
                "no compaction strategy available: install or enable a compaction engine "
                "([compaction] in kairox.toml) before compacting"
            )
        result = await engine.compact(self, first_seq=first_seq, last_seq=last_seq, trigger=trigger)
        if result.ok:
            for other in self.services.engines:
                name = other.name
                try:
                    await other.on_compacted(self, result)
                except Exception as exc:  # an engine never undoes a compaction
                    result.notes.append(
                        f"on_compacted of engine {name} failed: {type(exc).__name__}: {exc}"
                    )
                else:
                    result.engines.append(name)
        self.record_compaction(result)
        return result

    def record_compaction(self, result: CompactionResult) -> None:
        """Count ``result`` among the compactions of the turn whose end is running (its
        ``TurnResult.compactions``); outside a turn's end, nothing to do. An engine that
        decides not to compact (a skip recorded by itself) reports it here too."""
        if self._compactions is not None:
            self._compactions.append(result)

    # pin / edit / drop: one event each, queued behind any turn or compaction in flight

    async def pin_fact(self, text: str, *, source_seq: int | None = None) -> FactPinned:
        """Pin ``text``: included verbatim in every later turn, whatever compaction does."""
        async with self._lock:
            return edits.pin_fact(
                self.services.events, self.id, self.compaction, text, source_seq=source_seq
            )

    async def unpin_fact(self, fact_id: str) -> FactUnpinned:
        """Release a pinned fact: later turns no longer include it."""
        async with self._lock:
            return edits.unpin_fact(self.services.events, self.id, self.compaction, fact_id)

    async def edit_summary(self, summary_seq: int, text: str) -> SummaryEdited:
        """Replace an active summary's text (the original stays in the audit trail)."""
        async with self._lock:
            return edits.edit_summary(
                self.services.events, self.id, self.compaction, summary_seq, text
            )

    async def drop_chunk(self, summary_seq: int, chunk_index: int) -> ChunkDropped:
        """Drop one chunk (line) of an active summary from what later turns see."""
        async with self._lock:
            return edits.drop_chunk(
                self.services.events, self.id, self.compaction, summary_seq, chunk_index
            )

    async def archive(self, *, reason: str | None = None) -> int:
        """End the session: ``SessionArchived`` is appended and its session memories are
        discarded; its events stay (nothing is ever deleted) and pending user/workspace
        proposals stay pending. Waits for any turn or compaction in flight. Returns how
        many session memories were discarded."""
        async with self._lock:
            return self.services.approvals.archive_session(self.id, reason=reason)

    pin_fact_sync = idle_twin(pin_fact)
    unpin_fact_sync = idle_twin(unpin_fact)
    edit_summary_sync = idle_twin(edit_summary)
    drop_chunk_sync = idle_twin(drop_chunk)
    archive_sync = idle_twin(archive)
    compact_sync = idle_twin(compact)

    async def switch_profile(self, profile: str) -> None:
        """Switch the session's profile; waits for any turn or compaction in flight."""
        async with self._lock:
            self._switch(profile)

    def switch_profile_sync(self, profile: str) -> None:
        self._check_idle()
        self._switch(profile)

    def _switch(self, profile: str) -> None:
        name, _ = self.services.config.resolve_profile(profile)
        if name == self.profile:
            return
        self.services.events.append(
            ProfileSwitched(session_id=self.id, from_profile=self.profile, to_profile=name)
        )
        self.profile = name

    async def _after_turn(self, result: TurnResult) -> None:
        """Engines after a turn: each in order, the session still locked; the
        compactions they run are collected into ``result.compactions``."""
        self._compactions = result.compactions
        try:
            for engine in self.services.engines:
                await engine.after_turn(self, result)
        finally:
            self._compactions = None

    def events(self) -> list[Event]:
        return self.services.events.read(self.id)


__all__ = [
    "DELTA_BATCH_CHARS",
    "DELTA_BATCH_COUNT",
    "NoCompactionStrategy",
    "Session",
    "Turn",
    "TurnInProgress",
    "TurnResult",
    "model_view",
]
