"""The compactor: turns the oldest stretch of a session into one summary, with provenance.

``Compactor`` is an engine (kairox_core/engines.py), registered as the built-in
``compaction`` engine: it serves ``Session.compact()`` (``CompactionEngine``) and checks
the trigger in ``after_turn``. Every run happens with the session held (its lock, see
session.py), so it never overlaps a turn, an edit or a profile switch. Events, in order:
``ContextCompactionStarted`` -> ``CompactionSummary`` (the redacted summary, the replaced
seq range, folded summaries, strategy, model, tokens in and out, usage) ->
``ContextCompactionCompleted``; or ``ContextCompactionFailed`` (the session goes on);
``ContextCompactionSkipped`` when there is nothing to do, compaction is disabled, or
another process is compacting the same session. Originals are never
deleted: the assembler just stops reading the replaced range.

Across processes a run holds the session's compaction lease (``compaction:<session>``
in the storage's ``leases``, taken atomically in the database and renewed while the
run is alive), so one stretch is compacted once. A run whose process died (kill -9)
leaves a ``ContextCompactionStarted`` with no end and a dead lease: the next run
takes the lease at once, closes the dead run with ``ContextCompactionFailed`` naming
its holder, and proceeds.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kairox_core.compaction.attachments import (
    image_markers,
    keep_image_markers,
    prepare_originals,
)
from kairox_core.compaction.planning import (
    CONVERSATION_TYPES,
    Plan,
    align_to_turns,
    cap_stretch,
    covered,
    gaps,
    oldest_stretch,
    with_folds,
)
from kairox_core.compaction.strategies import StrategyOutcome, run_strategy
from kairox_core.compaction.synopsis import write_synopsis
from kairox_core.engines import CompactionResult, Engine, EngineHolder, TurnResult
from kairox_core.errors import KairoxUserError
from kairox_core.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
)
from kairox_core.store.leases import HOST, Heartbeat, Lease, pid_alive

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import EngineSession as Session

# One automatic run summarises at most this many budgets' worth of history; a backlog
# (compaction was failing or disabled) is worked off in up to MAX_RUNS_PER_TURN runs.
STRETCH_BUDGETS = 4
MAX_RUNS_PER_TURN = 3
# The compaction lease: short, renewed every third of it while the run is alive, so a
# holder that died on another host is displaced within this; on this host, at once.
LEASE_SECONDS = 30.0


def lease_name(session_id: str) -> str:
    return f"compaction:{session_id}"


class LeaseLost(RuntimeError):
    """The run no longer holds the session's compaction lease when it would store."""


class Compactor(Engine):
    """One per ``Kairox``: the built-in ``compaction`` engine."""

    name = "compaction"

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._running: set[str] = set()

    # --- the turn-end check ----------------------------------------------------------------

    def trigger_tokens(self, session: Session) -> int:
        _, profile = self.ctx.config.resolve_profile(session.profile)
        return int(profile.compaction_trigger * profile.budget)

    async def after_turn(self, session: Session, result: TurnResult | None = None) -> None:
        """Compact before the next input when the next turn would pass the trigger."""
        limit = self.trigger_tokens(session)
        if session.history_tokens(limit) <= limit:
            return
        if not self.ctx.config.compaction.enabled:
            recorded: list[Event] = []
            skipped = self._skip(
                session,
                "the history passed the compaction trigger but compaction "
                "is disabled ([compaction] enabled = false)",
                "auto",
                recorded,
            )
            skipped.events = tuple(recorded)
            session.record_compaction(skipped)  # the turn's result says so
            return
        for _ in range(MAX_RUNS_PER_TURN):  # a long backlog (after failures) takes a few
            outcome = await session.compact_locked(trigger="auto")  # engines told
            if not outcome.ok or session.history_tokens(limit) <= limit:
                return

    # --- a long document's synopsis, when a turn attaches it (SynopsisWriter) --------------

    async def synopsis(
        self, session: Session, attachment: Mapping[str, Any]
    ) -> dict[str, str] | None:
        return await write_synopsis(self.ctx.config, session, attachment)

    # --- one run ----------------------------------------------------------------------------

    async def compact(
        self,
        session: Session,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        trigger: str = "manual",
    ) -> CompactionResult:
        """Compact (the session must be held by the caller: ``session.compact_locked``,
        which also hands a completed result to the engines' ``on_compacted``). The
        result's ``events`` are those this run recorded."""
        recorded: list[Event] = []
        result = await self._compact(session, first_seq, last_seq, trigger, recorded)
        result.events = tuple(recorded)
        return result

    async def _compact(
        self,
        session: Session,
        first_seq: int | None,
        last_seq: int | None,
        trigger: str,
        recorded: list[Event],
    ) -> CompactionResult:
        if session.id in self._running:
            return self._skip(session, "a compaction of this session is running", trigger, recorded)
        if first_seq is not None and last_seq is not None and first_seq > last_seq:
            raise KairoxUserError(
                f"the range {first_seq}:{last_seq} is empty; give A:B with "
                f"A <= B (seqs as `kairox events` shows them)"
            )
        leases = self.ctx.storage.leases
        cid = f"c-{uuid.uuid4().hex[:12]}"
        name = lease_name(session.id)
        claim = leases.acquire(name, cid, ttl=LEASE_SECONDS, note=cid)
        if claim.lease is None:
            held = f" ({claim.current.describe()})" if claim.current is not None else ""
            reason = f"another process is compacting this session{held}"
            return self._skip(session, reason, trigger, recorded)
        self._running.add(session.id)
        try:
            self._close_dead_run(session, claim.displaced, recorded)
            try:
                plan = self.plan(session, first_seq, last_seq)
            except KairoxUserError:
                raise
            except Exception as exc:  # e.g. a bad [compaction] setting at turn end
                if trigger == "manual":
                    raise
                reason = f"could not plan: {type(exc).__name__}: {exc}"
                return self._skip(session, reason, trigger, recorded)
            if isinstance(plan, str):
                return self._skip(session, plan, trigger, recorded)
            with Heartbeat(leases, name, cid, LEASE_SECONDS):
                return await self._execute(session, plan, trigger, cid, recorded)
        finally:
            self._running.discard(session.id)
            leases.release(name, cid)

    def _close_dead_run(
        self, session: Session, displaced: Lease | None, recorded: list[Event]
    ) -> None:
        """With the lease held, a ``ContextCompactionStarted`` with no end is a run whose
        process died: record ``ContextCompactionFailed`` for it so the audit trail says
        why it never ended."""
        store = self.ctx.events
        seq = store.compaction_running(session.id)
        if seq is None:
            return
        started = store.read(session.id, first_seq=seq, last_seq=seq)
        if not started or not isinstance(started[0], ContextCompactionStarted):
            return
        dead = started[0].compaction_id
        if displaced is not None and displaced.note == dead:
            gone = displaced.host == HOST and not pid_alive(displaced.pid)
            cause = (
                f"pid {displaced.pid} is gone on host {displaced.host}"
                if gone
                else "its lease expired without renewal"
            )
            reason = f"the process running this compaction died ({displaced.describe()}: {cause})"
        else:
            reason = "the process running this compaction died (no process holds its lease)"
        recorded.append(
            store.append(
                ContextCompactionFailed(session_id=session.id, compaction_id=dead, reason=reason)
            )
        )

    def plan(self, session: Session, first_seq: int | None, last_seq: int | None) -> Plan | str:
        """The range to compact, or why there is none."""
        cfg = self.ctx.config.compaction
        store = self.ctx.events
        state = session.refresh_compaction()
        summaries = state.summaries
        ranges = state.covered_ranges()
        if first_seq is not None or last_seq is not None:
            lo = first_seq if first_seq is not None else 1
            hi = last_seq if last_seq is not None else store.last_seq(session.id)
            rows = store.conversation_rows(session.id)
            lo, hi = align_to_turns(rows, lo, hi)
            inside = [r.seq for r in rows if lo <= r.seq <= hi]
            if inside:  # a range past the newest message must not cover turns yet to come
                hi = inside[-1]
            lo, hi, folded = with_folds(lo, hi, summaries, fold_before=False)
            if not any(lo <= r.seq <= hi and not covered(r.seq, ranges) for r in rows):
                return f"nothing to compact in seqs {lo}-{hi}: no uncompacted messages there"
            return Plan(lo, hi, folded=folded)
        rows = store.conversation_rows(session.id, ranges)
        stretch = oldest_stretch(rows, ranges, cfg.keep_recent_exchanges)
        if not stretch:
            return (
                f"nothing to compact: only the {cfg.keep_recent_exchanges} most recent "
                f"exchanges ([compaction] keep_recent_exchanges) are uncompacted"
            )
        _, profile = self.ctx.config.resolve_profile(session.profile)
        stretch = cap_stretch(stretch, STRETCH_BUDGETS * profile.budget)
        lo, hi = stretch[0].first_seq, stretch[-1].last_seq
        counter = session.assembler().counter
        held = sum(counter.raw_count(s.text) for s in summaries)
        fold = held + cfg.target_tokens > cfg.summaries_share * profile.budget
        lo, hi, folded = with_folds(lo, hi, summaries, fold_before=fold)
        return Plan(lo, hi, exchanges=tuple(stretch), folded=folded)

    async def _execute(
        self, session: Session, plan: Plan, trigger: str, cid: str, recorded: list[Event]
    ) -> CompactionResult:
        ctx = self.ctx
        cfg = ctx.config.compaction
        started = ContextCompactionStarted(
            session_id=session.id,
            compaction_id=cid,
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            strategy=cfg.strategy,
            trigger=trigger,
        )
        recorded.append(ctx.events.append(started))
        result = CompactionResult(
            "failed",
            compaction_id=cid,
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            folded=plan.folded_seqs,
            strategy=cfg.strategy,
        )
        try:
            originals = self._originals(session, plan)
            outcome = await run_strategy(
                ctx.config,
                session,
                originals,
                plan.folded,
                prepare_originals(originals, ctx.config),
            )
            markers = image_markers(originals, [s.text for s in plan.folded])
            outcome = dataclasses.replace(outcome, text=keep_image_markers(outcome.text, markers))
            summary = self._store(session, cid, plan, outcome, recorded)
        except Exception as exc:  # any strategy failure: record it, the session goes on
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            failed = ContextCompactionFailed(
                session_id=session.id, compaction_id=cid, reason=reason
            )
            recorded.append(ctx.events.append(failed))
            result.reason = reason
            return result
        except BaseException:  # cancelled: close the run in the audit, then go on unwinding
            cancelled = ContextCompactionFailed(
                session_id=session.id, compaction_id=cid, reason="cancelled"
            )
            recorded.append(ctx.events.append(cancelled))
            raise
        session.refresh_compaction()
        result.status, result.summary_seq = "completed", summary.seq
        result.tokens_in, result.tokens_out = summary.tokens_in, summary.tokens_out
        result.strategy = summary.strategy
        result.summary, result.originals = summary, tuple(originals)
        return result

    def _originals(self, session: Session, plan: Plan) -> list[Event]:
        """The original conversation events the new summary replaces (not those that
        folded summaries already replaced: only the gaps between them are read)."""
        events: list[Event] = []
        for lo, hi in gaps(
            plan.first_seq, plan.last_seq, [(s.first_seq, s.last_seq) for s in plan.folded]
        ):
            events += self.ctx.events.read(
                session.id, first_seq=lo, last_seq=hi, types=CONVERSATION_TYPES
            )
        return events

    def _store(
        self,
        session: Session,
        cid: str,
        plan: Plan,
        outcome: StrategyOutcome,
        recorded: list[Event],
    ) -> CompactionSummary:
        ctx = self.ctx
        with ctx.storage.atomic():
            if not ctx.storage.leases.renew(lease_name(session.id), cid, ttl=LEASE_SECONDS):
                raise LeaseLost(
                    "this run stalled past its lease and another process took over the "
                    "session's compaction; nothing was stored"
                )
            stored = ctx.events.append(
                CompactionSummary(
                    session_id=session.id,
                    compaction_id=cid,
                    summary=outcome.text,
                    first_seq=plan.first_seq,
                    last_seq=plan.last_seq,
                    strategy=outcome.strategy,
                    model=outcome.model,
                    tokens_in=outcome.tokens_in,
                    tokens_out=outcome.tokens_out,
                    folded_summaries=plan.folded_seqs,
                    usage=outcome.usage,
                )
            )
            assert isinstance(stored, CompactionSummary) and stored.seq is not None
            completed = ctx.events.append(
                ContextCompactionCompleted(
                    session_id=session.id, compaction_id=cid, summary_seq=stored.seq
                )
            )
        recorded += [stored, completed]  # once committed
        return stored

    # --- skips --------------------------------------------------------------------------------

    def _skip(
        self, session: Session, reason: str, trigger: str, recorded: list[Event]
    ) -> CompactionResult:
        recorded.append(
            self.ctx.events.append(
                ContextCompactionSkipped(session_id=session.id, reason=reason, trigger=trigger)
            )
        )
        return CompactionResult("skipped", reason=reason)


def compactor_of(holder: EngineHolder) -> Compactor:
    """The ``Kairox``'s built-in compaction engine (tests, benchmarks)."""
    engine = holder.engine("compaction")
    if not isinstance(engine, Compactor):
        raise LookupError("the built-in compaction engine is not installed")
    return engine


__all__ = ["CompactionResult", "Compactor", "compactor_of"]
