"""Recall of past turns: every turn of a session stays searchable, verbatim.

A summary keeps the thread, not every fact; and with a small window even uncompacted
turns fall out of the history the assembler can hold. So every conversation event
(user and assistant messages, tool results) is indexed, one document each, into the
workspace retrieval index (the same tables, FTS5 + sqlite-vec, the configured
``[retrieval]`` backend), in a space of its own per session
(``<workspace>#session:<id>``, doc_type ``conversation``, metadata ``session_id``,
``seq``, ``speaker``, ``date``, and ``line_tokens``: the count of the line it is
recalled as, so a turn that recalls it does not encode it: context/recalled.py's
``line_stamp``). A space per session keeps past conversations out of
the workspace's document search and makes another session's turns unreachable by
construction (the ``session_id`` filter is applied as well). Each turn is embedded with
the turn before it as context (``DocumentInput.context``): "Yes, last May!" is found by
the question it answers.

Indexing is off the turn's critical path: ``after_turn`` indexes the finished turn in
a worker thread while the caller goes on (the model's next reply hides it). It is
incremental and idempotent: before each search, ``catch_up`` (waiting for that
background work, one per session at a time) indexes the events written since the last
one it saw, whichever process wrote them, and at most
``BACKLOG_STEP`` older ones, newest first, that were written before recall was on (a
long session's first search would otherwise embed thousands of turns at once).
The event store records the indexed stretch (``indexed_stretch``); a doc id per seq
makes a repeat a no-op. A turn's own search (``defer``) skips the catch-up when the
only turns missing are the newest ``DEFER_MAX`` or fewer, which the history almost
always holds (the last turn, searched by the next one at once in an agent's loop): it
marks the search, and the assembler, once it knows which turns its history holds, has
it done again, indexed first, if one of them is not held (context/recalled.py). What
differs from catching up first: an unindexed turn the history holds takes no slot of
``[recall] k`` (the next-best turn, outside the history, gets it), and its words do not
count in the keyword statistics (bm25's document frequencies) of that search.
``turns`` then returns the best turns for the new prompt, one
hit each (source ``recall``); as the built-in ``recall`` engine, ``before_assembly``
contributes them (layer ``recalled``) and the assembler skips those its history holds
verbatim and fits the rest, turn by turn, within the retrieval share
(context/recalled.py renders them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from kairox_core.capabilities import ann_graph, term_stats
from kairox_core.compaction.base import history_items
from kairox_core.context.recalled import (
    DOC_TYPE,
    LINE_TOKENS,
    SOURCE,
    deferred_mark,
    line_stamp,
    turn_seq,
)
from kairox_core.engines import (
    AssemblyRequest,
    CompactionResult,
    Contribution,
    Engine,
    EngineHolder,
    TurnResult,
)
from kairox_core.errors import StorageError
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.recall.rank import arrange_recalled
from kairox_core.redaction import redact
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.index import DocumentInput, IndexBackendMismatch
from kairox_core.retrieval.rerank import rerank_for_profile
from kairox_core.retrieval.threads import run_blocking
from kairox_core.store.event_store import CONVERSATION_TYPES
from kairox_core.usecache import memo_by_text, text_and_result

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import EngineSession as Session
    from kairox_core.retrieval.base import EmbeddingBackend
    from kairox_core.store.protocol import WorkspaceIndex

T = TypeVar("T")
log = logging.getLogger(__name__)
CONTEXT_CHARS = 600  # the previous turn's tail embedded with a turn (the model reads ~256 tokens)
BACKLOG_STEP = 128  # older turns indexed per catch-up, newest first
BULK_STEP = 4096  # seqs read per slice by ``index_all`` (bounded memory at 100k turns)
BACKGROUND_DELAY = 0.25  # seconds from a turn's end to its background indexing
DEFER_MAX = 64  # newest turns a turn's search may leave unindexed (the history holds them)
DEFER_FREE = 8  # of those, left to the background for free (a short run of turns)
SLICE = 8  # at most this many of the oldest beyond ``DEFER_FREE`` indexed by one search


def recall_space(workspace_id: str, session_id: str) -> str:
    """The index space (``workspace_id`` column) holding one session's turns."""
    return f"{workspace_id}#session:{session_id}"


def turn_date(event: Event) -> str:
    """The event's day as ``YYYY-MM-DD`` (UTC): when the turn was said."""
    moment = dt.datetime.fromtimestamp(event.created_at, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d")


def turn_text(event: Event) -> tuple[str, str] | None:
    """(speaker, text) of a conversation event; None for other events."""
    items = history_items([event])
    if not items:
        return None
    item = items[0]
    return (f"tool {item.name}" if item.role == "tool" else item.role), item.text


def turn_document(event: Event, previous: Event | None = None) -> DocumentInput | None:
    """One conversation event as a document (None: nothing to index); ``previous``, the
    event before it, is embedded with it as context."""
    said = turn_text(event)
    if said is None or event.seq is None or not said[1].strip():
        return None
    assert isinstance(event, UserMessageAdded | AssistantMessageCompleted | ToolInvocationCompleted)
    speaker, text = said
    before = turn_text(previous) if previous is not None else None
    # redactions are remembered: each turn is redacted as the next one's context too
    context = _redacted(before[1].strip())[-CONTEXT_CHARS:] if before else ""
    meta = {
        "session_id": event.session_id,
        "seq": event.seq,
        "speaker": speaker,
        "date": turn_date(event),
        "turn_id": event.turn_id,
        "redacted": True,  # the text below is redacted: no second pass when recalled
    }
    return DocumentInput(
        doc_id=f"turn:{event.session_id}:{event.seq}",
        text=_redacted(text),  # re-sent to the model later, like a summary; the event keeps it
        doc_type=DOC_TYPE,
        metadata=meta,
        context=context,
    )


class Recall(Engine):
    """One per ``Kairox`` (the built-in ``recall`` engine): indexes a session's turns
    and finds them again for a prompt."""

    name = "recall"

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._backend: EmbeddingBackend | None = None
        self._indexes: dict[str, WorkspaceIndex] = {}
        self._lock = threading.RLock()
        self._session_locks: dict[str, threading.Lock] = {}
        self._pending: set[asyncio.Task[int]] = set()
        self._wakes: dict[asyncio.Task[int], asyncio.Future[None]] = {}
        self._indexed: dict[str, tuple[int, int]] = {}  # session -> stretch indexed here
        self._latest: dict[str, int] = {}  # session -> its last finished turn's reply seq
        self._bottom: dict[str, int] = {}  # session -> a stretch low with no turn below it

    async def before_assembly(
        self, session: Session, request: AssemblyRequest
    ) -> list[Contribution]:
        """The session's past turns that match the prompt, as one contribution. Indexing
        and search (embedding, SQLite) run in a worker thread, off the event loop: one of
        the process's reused daemon threads (``run_blocking``), so the first turn of a new
        loop does not start the loop's executor thread."""
        hits = await run_blocking(
            functools.partial(
                self.turns, session, request.prompt, before_seq=request.before_seq, defer=True
            ),
            name="kairox-recall",
        )
        return [Contribution(self.name, "recalled", label="recalled turns", hits=tuple(hits))]

    async def after_turn(self, session: Session, result: TurnResult) -> None:
        """Index the finished turn in the background, off the turn's critical path: the
        caller gets ``complete()`` back at once, the model's next reply hides the work,
        and the next search's ``catch_up`` waits for it (same session lock) and indexes
        whatever is still missing, so every earlier turn is found, from any process.

        The work starts ``BACKGROUND_DELAY`` later (at once on ``aclose``), and only for
        the session's latest turn: a turn that follows right away (an agent's loop)
        searches without it (the history holds it: ``DeferredTurns``) and its own task
        indexes both. Run beside that turn, in a second thread, it slowed the turn: the
        two threads took turns at the GIL, every SQLite call waiting out the
        interpreter's switch interval (``sys.getswitchinterval()``)."""
        if not self.enabled:
            return
        self._latest[session.id] = max(self._latest.get(session.id, 0), result.assistant_seq)
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._index_soon(session, wake, result.assistant_seq))
        self._pending.add(task)
        self._wakes[task] = wake
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[int]) -> None:
        self._pending.discard(task)
        self._wakes.pop(task, None)

    async def _index_soon(self, session: Session, wake: asyncio.Future[None], seq: int) -> int:
        await asyncio.wait({wake}, timeout=BACKGROUND_DELAY)
        if self.ctx.closed:  # the Kairox closed from another loop meanwhile: the
            return 0  # next search (any process) indexes the turn
        if self._latest.get(session.id, seq) > seq:
            return 0  # a later turn followed within the delay: its own task indexes both
        if session.busy and not wake.done():
            # a turn (or compaction) began since: indexing beside it, in a second thread,
            # would take turns at the GIL with it (on busy cores a turn outlasts the
            # delay, and a third of them ran several times slower); its own task, or the
            # next search, indexes this turn too
            return 0
        low, last = self._indexed.get(session.id, (1, 0))
        if low == 0 and last >= seq:  # a search since has indexed it all, the turn included
            return 0
        return await asyncio.to_thread(self._catch_up_quietly, session)

    def _catch_up_quietly(self, session: Session) -> int:
        """``catch_up`` for the background: a failure is logged, never raised (nobody
        awaits it; the next search's catch-up retries, indexing is idempotent)."""
        try:
            changed = self.catch_up(session)
            stats = term_stats(self.index(session))
            if changed and stats is not None:  # the keyword counts, once grown by a quarter
                stats.refresh_term_stats()
            return changed
        except StorageError as exc:  # the database's state, said without a traceback
            log.warning("recall: background indexing failed, retried next turn: %s", exc)
            return 0
        except Exception:  # retried by the next search
            log.warning("recall: background indexing failed; retried next turn", exc_info=True)
            return 0

    async def aclose(self) -> None:
        """Wait for background indexing (the storage closes after the engines)."""
        pending = [t for t in self._pending if t.get_loop() is asyncio.get_running_loop()]
        for task in pending:
            wake = self._wakes.get(task)
            if wake is not None and not wake.done():
                wake.set_result(None)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    @property
    def enabled(self) -> bool:
        return bool(self.ctx.config.recall.enabled)

    def _session_lock(self, session_id: str) -> threading.Lock:
        with self._lock:
            return self._session_locks.setdefault(session_id, threading.Lock())

    # --- indexing ----------------------------------------------------------------------

    def index(self, session: Session) -> WorkspaceIndex:
        """The session's recall space (one embedding backend shared by all spaces)."""
        space = recall_space(session.workspace_id, session.id)
        with self._lock:
            index = self._indexes.get(space)
            if index is None:
                if self._backend is None:
                    from kairox_core.retrieval.embeddings import load_embedding_backend

                    self._backend = load_embedding_backend(self.ctx.config.retrieval)
                index = self.ctx.storage.workspace_index(
                    self.ctx.config, space, backend=self._backend
                )
                self._indexes[space] = index
            return index

    async def on_compacted(self, session: Session, compaction: CompactionResult) -> None:
        """Bring the index up to date while the session waits for its compaction
        anyway (the next search then has nothing to embed)."""
        if self.enabled:
            await asyncio.to_thread(self.catch_up, session)

    def progress(self, session_id: str) -> tuple[int, int] | None:
        """The stretch of seqs already indexed, (low, last); None before the first."""
        return self.ctx.events.indexed_stretch(session_id)

    def catch_up(self, session: Session) -> int:
        """Index the turns written since the last call (all of them) and up to
        ``BACKLOG_STEP`` older ones not indexed yet (newest first); returns how many
        documents were added or updated. One at a time per session (the background
        indexing of the last turn and the next search's catch-up)."""
        with self._session_lock(session.id):
            return self._catch_up(session)

    def index_all(self, session: Session) -> int:
        """Index every turn of the session not indexed yet, in large batches, oldest
        first: a bulk load (an import, a benchmark's session) instead of a backlog
        spread over many searches. Returns how many documents were added or updated."""
        with self._session_lock(session.id):
            top = self.ctx.events.last_seq(session.id)
            changed = 0
            for first in range(0, top + 1, BULK_STEP):
                last = min(first + BULK_STEP - 1, top)
                context = self.ctx.events.conversation_seqs(session.id, first, 1)
                changed += self._index_range(session, first, last, context, batch_size=512)
            if top > 0:
                self.ctx.events.set_indexed_stretch(session.id, 0, top)
            index = self.index(session)
            stats, graph = term_stats(index), ann_graph(index)
            if stats is not None:  # the keyword counts, and a large space's ANN graph:
                stats.refresh_term_stats()  # now, not inside a search
            if graph is not None:
                graph.build_ann()
            return changed

    def _catch_up(self, session: Session) -> int:
        known = self.progress(session.id)
        changed = 0
        if known is None:
            seqs = self._seqs_below(session.id, None)
            if not seqs:
                return 0
            low, last = seqs[min(len(seqs), BACKLOG_STEP) - 1], seqs[0]
            changed += self._index_range(session, low, last, seqs)
        else:
            low, last = known
            top = self.ctx.events.last_seq(session.id)
            if top > last:
                context = self._seqs_below(session.id, last + 1)[:1]
                changed += self._index_range(session, last + 1, top, context)
                last = top
            if low > 0:
                seqs = self._seqs_below(session.id, low)
                if seqs:
                    first = seqs[min(len(seqs), BACKLOG_STEP) - 1]
                    changed += self._index_range(session, first, low - 1, seqs)
                    low = first
                else:
                    low = 0  # everything down to the session's first turn is indexed
        if known != (low, last):  # nothing new (most searches): no write transaction
            self.ctx.events.set_indexed_stretch(session.id, low, last)
        self._indexed[session.id] = (low, last)
        return changed

    def _seqs_below(self, session_id: str, below: int | None) -> list[int]:
        """Seqs of conversation events below ``below`` (None: all), newest first: one
        step's worth and the one before it (the oldest turn's context)."""
        return self.ctx.events.conversation_seqs(session_id, below, BACKLOG_STEP + 1)

    def _index_range(
        self,
        session: Session,
        first: int,
        last: int,
        around: Sequence[int],
        *,
        batch_size: int = 64,
    ) -> int:
        """Index the conversation events in [first, last], each with the one before it
        as context (read from the highest of ``around`` below ``first``)."""
        before = [s for s in around if s < first]
        events = self.ctx.events.read(
            session.id,
            first_seq=max(before, default=first),
            last_seq=last,
            types=CONVERSATION_TYPES,
        )
        docs = []
        previous: Event | None = None
        for event in events:
            if (event.seq or 0) >= first:
                doc = turn_document(event, previous)
                if doc is not None:
                    docs.append(doc)
            previous = event
        return sum(1 for s in self._add(session, docs, batch_size) if s != "unchanged")

    def _add(self, session: Session, docs: list[DocumentInput], batch_size: int = 64) -> list[str]:
        if not docs:
            return []
        pc = session.assembler().counter  # each turn's line count, for the turns that recall it
        docs = [
            dataclasses.replace(
                d,
                metadata={**d.metadata, LINE_TOKENS: line_stamp(pc, d.metadata["speaker"], d.text)},
            )
            for d in docs
        ]
        index = self.index(session)
        return _rebuilt_if_needed(index, lambda: index.add_documents(docs, batch_size=batch_size))

    # --- recalling ---------------------------------------------------------------------

    def turns(
        self,
        session: Session,
        prompt: str,
        *,
        before_seq: int | None = None,
        defer: bool = False,
    ) -> list[RetrievalHit]:
        """The session's past turns that best match ``prompt``, one hit each, best
        first (at most ``[recall] k``); only seqs below ``before_seq``.

        ``defer`` (the assembler's call, which settles the mark: context/recalled.py):
        when the only turns not indexed yet are the newest few, search without them
        and add a ``DeferredTurns`` mark. They are almost always in the history the
        assembler keeps, so they would be skipped anyway; when one is not, the
        assembler calls the mark back and the search is done again, indexed first.
        Indexing the last turn cost most of a back-to-back turn's recall."""
        if not self.enabled or not prompt.strip():
            return []
        unindexed = self._newest_unindexed(session, before_seq) if defer else None
        if unindexed is None:
            self.catch_up(session)
        hits = self._search(session, prompt, before_seq)
        if not unindexed:
            return hits
        done: list[list[RetrievalHit]] = []

        def exact() -> list[RetrievalHit]:
            if not done:  # once: a reassembly after a tool call settles the same mark
                done.append(self.turns(session, prompt, before_seq=before_seq))
            return done[0]

        return [*hits, deferred_mark(hits, unindexed, exact)]

    def _newest_unindexed(self, session: Session, before_seq: int | None) -> tuple[int, ...] | None:
        """Seqs (below ``before_seq``) of the conversation turns written after the indexed
        stretch, when every older turn is indexed and they are at most ``DEFER_MAX``;
        None otherwise (the search catches up first)."""
        known = self.progress(session.id)
        if known is None:
            return None
        low, last = known
        if low > 0 and self._bottom.get(session.id) != low:
            if self.ctx.events.conversation_seqs(session.id, low, 1):
                return None  # a backlog of older turns (recall turned on late): index it
            self._bottom[session.id] = low  # nothing below: no second look
        known = (0, last)
        seqs = self.ctx.events.conversation_seqs(session.id, None, DEFER_MAX + 1)
        newer = sorted(s for s in seqs if s > last)
        if len(newer) > DEFER_MAX:
            return None
        self._indexed[session.id] = known
        if len(newer) > DEFER_FREE:
            last = self._index_oldest(session, newer[: min(len(newer) - DEFER_FREE, SLICE)])
            newer = [s for s in newer if s > last]
        return tuple(s for s in newer if before_seq is None or s < before_seq)

    def _index_oldest(self, session: Session, seqs: Sequence[int]) -> int:
        """Index the oldest unindexed turns ``seqs`` (ascending) inside this search, and
        return the indexed stretch's new top. Turns back to back leave the background no
        gap: without this, every ``DEFER_MAX // 2``-th turn indexed all the deferred
        turns at once (one turn in 32 took 130-240 ms of CPU); this way each search
        indexes about what the turn before it added, at most ``SLICE``."""
        with self._session_lock(session.id):
            known = self.progress(session.id)
            low, last = known if known is not None else (0, 0)
            if last < seqs[-1]:  # else the background indexing got there first
                context = self.ctx.events.conversation_seqs(session.id, last + 1, 1)
                self._index_range(session, last + 1, seqs[-1], context)
                self.ctx.events.set_indexed_stretch(session.id, low, seqs[-1])
                last = seqs[-1]
            self._indexed[session.id] = (0, last)
            return last

    def _search(self, session: Session, prompt: str, before_seq: int | None) -> list[RetrievalHit]:
        cfg = self.ctx.config
        index = self.index(session)
        # No filters: the space holds this session's turns only, and a filter would cost a
        # document-row read per keyword match and an exact vector scan (no vec0 KNN).
        filters: dict[str, str] = {}
        found = _rebuilt_if_needed(
            index,
            lambda: index.search(prompt, cfg.recall.k, cfg.retrieval.search_mode, filters),
        )
        hits = []
        for hit in found:
            seq = turn_seq(hit)
            if hit.metadata.get("session_id") != session.id or seq is None:
                continue
            if before_seq is None or seq < before_seq:
                # a turn indexed before redaction (no "redacted" mark) is redacted now
                text = hit.text if hit.metadata.get("redacted") is True else _redacted(hit.text)
                # built directly: ``dataclasses.replace`` re-validates every field, per hit
                hits.append(
                    RetrievalHit(text, hit.score, SOURCE, hit.doc_id, hit.metadata, hit.chunk_id)
                )
        hits = arrange_recalled(self.ctx, session, hits, before_seq, turn_document, prompt)
        return rerank_for_profile(cfg, session.profile, prompt, hits)


@memo_by_text(1024, 1_000_000, 1024, text_and_result)
def _redacted(text: str) -> str:
    """``redact`` for a recalled turn, remembered: the same turns come back turn after
    turn (~32 lookups a turn), each turn is redacted again as the next one's context
    when indexed, and redaction runs a dozen regexes over each. Bounded by the
    characters held too, and a turn not asked for in 1,024 lookups goes (``usecache``:
    ~250 turns of ``serve``, which asks ~4 a turn; 8,192 kept every prompt for ~2,000
    turns, ~185 bytes each)."""
    return redact(text)


def _rebuilt_if_needed(index: WorkspaceIndex, call: Callable[[], T]) -> T:
    """``call()`` on the index; if ``[retrieval] backend`` changed since the session's
    turns were embedded, re-embed them (they are our own) and call again. Under the
    index's lock (its connection's), so no other thread sees the rebuild half done."""
    with index.lock:
        try:
            return call()
        except IndexBackendMismatch:
            index.rebuild()
            return call()


def recall_of(holder: EngineHolder) -> Recall:
    """The ``Kairox``'s recall engine (tests, benchmarks, tools that index by hand)."""
    engine = holder.engine("recall")
    if not isinstance(engine, Recall):
        raise LookupError("the recall engine is not installed")
    return engine


__all__ = [
    "DOC_TYPE",
    "SOURCE",
    "Recall",
    "recall_of",
    "recall_space",
    "turn_document",
    "turn_text",
]
