"""Recall of compacted history: compacted turns stay searchable, verbatim.

A summary keeps the thread, not every fact. So when a compaction stores a summary, the
original turns it replaced (user and assistant messages, tool results) are indexed, one
document each, into the workspace retrieval index (the same tables, FTS5 + sqlite-vec,
the configured ``[retrieval]`` backend), in a space of their own per session
(``<workspace>#session:<id>``, doc_type ``conversation``, metadata ``session_id``,
``seq``, ``speaker``, ``date``). A space per session keeps past conversations out of
the workspace's document search and makes another session's turns unreachable by
construction (the ``session_id`` filter is applied as well).

On each turn ``Recall.hits`` searches that space for the new prompt and returns the best
turns as retrieval hits (source ``recall``): the assembler fits them within the
retrieval share of the budget, grouped under ``[recalled turns of this conversation ...]``,
one line per turn: ``seq=<n> <speaker>: <text>`` under a line with its date.
Only seqs an active summary covers are returned, so a turn still present verbatim in
history never comes back twice. Indexing is idempotent (a doc id per seq, unchanged
text is not re-embedded) and incremental: the ``on_compacted`` callback indexes each new
summary's originals, and a catch-up before each search indexes any summary it has not
seen (compacted by another process, or before recall was enabled).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kairox_core.compaction.planning import CONVERSATION_TYPES
from kairox_core.context.sources import read_compaction_events
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.index import DocumentInput, IndexBackendMismatch, WorkspaceRagIndex
from kairox_core.store.migrations import migrate

if TYPE_CHECKING:
    from kairox_core.facade import Kairox
    from kairox_core.session import Session

DOC_TYPE = "conversation"
SOURCE = "recall"
COMPONENT = "recall"
MIGRATIONS = [
    """
    CREATE TABLE recall_indexed (
        session_id TEXT NOT NULL,
        summary_seq INTEGER NOT NULL,
        documents INTEGER NOT NULL,
        PRIMARY KEY (session_id, summary_seq)
    );
    """,
]


def recall_space(workspace_id: str, session_id: str) -> str:
    """The index space (``workspace_id`` column) holding one session's compacted turns."""
    return f"{workspace_id}#session:{session_id}"


def turn_date(event: Event) -> str:
    """The event's day as ``YYYY-MM-DD`` (UTC): when the turn was said."""
    moment = dt.datetime.fromtimestamp(event.created_at, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d")


def turn_document(event: Event) -> DocumentInput | None:
    """One compacted conversation event as a document (None: nothing to index)."""
    if isinstance(event, UserMessageAdded):
        speaker, text = "user", event.text
    elif isinstance(event, AssistantMessageCompleted):
        speaker, text = "assistant", event.text
    elif isinstance(event, ToolInvocationCompleted):
        speaker, text = f"tool {event.tool_name}", event.result
    else:
        return None
    if event.seq is None or not text.strip():
        return None
    meta = {"session_id": event.session_id, "seq": event.seq, "speaker": speaker,
            "date": turn_date(event), "turn_id": event.turn_id}
    return DocumentInput(doc_id=f"turn:{event.session_id}:{event.seq}", text=text,
                         doc_type=DOC_TYPE, metadata=meta)


def _covered(seq: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(lo <= seq <= hi for lo, hi in ranges)


class Recall:
    """One per ``Kairox``: indexes compacted turns and finds them again for a prompt."""

    def __init__(self, kx: Kairox) -> None:
        self.kx = kx
        self._backend: Any = None
        self._indexes: dict[str, WorkspaceRagIndex] = {}
        self._seen: dict[str, int] = {}  # session id -> compaction events checked up to
        self._lock = threading.RLock()
        with kx.db.lock:
            migrate(kx.db.conn, COMPONENT, MIGRATIONS)

    @property
    def enabled(self) -> bool:
        return bool(self.kx.config.compaction.recall)

    # --- indexing ----------------------------------------------------------------------

    def index(self, session: Session) -> WorkspaceRagIndex:
        """The session's recall space (one embedding backend shared by all spaces)."""
        space = recall_space(session.workspace_id, session.id)
        with self._lock:
            index = self._indexes.get(space)
            if index is None:
                if self._backend is None:
                    from kairox_core.retrieval.embeddings import load_embedding_backend

                    self._backend = load_embedding_backend(self.kx.config.retrieval)
                index = WorkspaceRagIndex.from_config(self.kx.config, self.kx.db.conn, space,
                                                      backend=self._backend)
                self._indexes[space] = index
            return index

    async def on_compacted(self, session: Session, summary: CompactionSummary,
                           originals: Sequence[Event]) -> None:
        """The compactor's callback: index the turns ``summary`` just replaced."""
        if self.enabled and summary.seq is not None:
            self.index_originals(session, summary.seq, originals)

    def index_originals(self, session: Session, summary_seq: int,
                        originals: Sequence[Event]) -> list[str]:
        """Index ``originals`` (idempotent) and record ``summary_seq`` as handled."""
        docs = [d for d in (turn_document(e) for e in originals) if d is not None]
        statuses = self._add(session, docs)
        db = self.kx.db
        with db.lock, db.atomic():
            db.conn.execute(
                "INSERT OR REPLACE INTO recall_indexed(session_id, summary_seq, documents) "
                "VALUES (?, ?, ?)", (session.id, summary_seq, len(docs)))
        return statuses

    def _add(self, session: Session, docs: list[DocumentInput]) -> list[str]:
        if not docs:
            return []
        index = self.index(session)
        with self.kx.db.lock:
            try:
                return index.add_documents(docs)
            except IndexBackendMismatch:
                # [retrieval] backend changed: these are our own turns, re-embed them.
                index.rebuild()
                return index.add_documents(docs)

    def catch_up(self, session: Session) -> int:
        """Index every summary's turns not indexed yet; returns how many summaries."""
        store = self.kx.events_store
        after = self._seen.get(session.id, 0)
        events = read_compaction_events(store, session.id, after)
        summaries = [e for e in events if isinstance(e, CompactionSummary) and e.seq]
        if events:
            self._seen[session.id] = max(e.seq or 0 for e in events)
        if not summaries:
            return 0
        with self.kx.db.lock:
            done = {int(r[0]) for r in self.kx.db.conn.execute(
                "SELECT summary_seq FROM recall_indexed WHERE session_id = ?", (session.id,))}
        handled = 0
        for summary in summaries:
            assert summary.seq is not None
            if summary.seq in done:
                continue
            originals = store.read(session.id, first_seq=summary.first_seq,
                                   last_seq=summary.last_seq, types=CONVERSATION_TYPES)
            self.index_originals(session, summary.seq, originals)
            handled += 1
        return handled

    # --- recalling ---------------------------------------------------------------------

    def hits(self, session: Session, prompt: str) -> list[RetrievalHit]:
        """This session's compacted turns that best match ``prompt``, best first; only
        seqs an active summary replaces (never a turn still in history)."""
        if not self.enabled or not prompt.strip():
            return []
        self.catch_up(session)
        ranges = session.refresh_compaction().covered_ranges()
        if not ranges:
            return []
        cfg = self.kx.config
        index = self.index(session)
        with self.kx.db.lock:
            try:
                found = index.search(prompt, cfg.compaction.recall_k, cfg.retrieval.mode,
                                     {"doc_type": DOC_TYPE, "session_id": session.id})
            except IndexBackendMismatch:
                index.rebuild()
                found = index.search(prompt, cfg.compaction.recall_k, cfg.retrieval.mode,
                                     {"doc_type": DOC_TYPE, "session_id": session.id})
        turns = []
        for hit in found:
            seq = hit.metadata.get("seq")
            if hit.metadata.get("session_id") != session.id or not isinstance(seq, int):
                continue
            if _covered(seq, ranges):
                turns.append(hit)
        return group_turns(turns, session.id)


def group_turns(turns: Sequence[RetrievalHit], session_id: str) -> list[RetrievalHit]:
    """Best-ranked turns packed into a few hits, best group first.

    One labelled item per turn would spend ~16 tokens of header on a ~30-token turn;
    a group is one item whose lines carry ``seq=<n> <speaker>:`` and a date line when
    the day changes (chronological inside the group). Groups are small at the tail
    (``GROUP_SIZES``) so the retrieval share fills closely."""
    hits: list[RetrievalHit] = []
    start = 0
    for size in _group_sizes(len(turns)):
        group = sorted(turns[start:start + size], key=lambda h: int(h.metadata["seq"]))
        start += size
        lines: list[str] = []
        day = None
        for h in group:
            meta = h.metadata
            if meta.get("date") != day:
                day = meta.get("date")
                lines.append(f"{day}:")
            lines.append(f"seq={meta['seq']} {meta.get('speaker')}: {h.text.strip()}")
        seqs = [int(h.metadata["seq"]) for h in group]
        hits.append(RetrievalHit(
            text="\n".join(lines), score=max(h.score for h in group), source=SOURCE,
            doc_id=f"turns:{session_id}:{','.join(map(str, seqs))}",
            metadata={"session_id": session_id, "seqs": seqs, "doc_type": DOC_TYPE}))
    return hits


GROUP_SIZES = (8, 2)  # turns per group: GROUP_LARGE groups of 8 first, then pairs
GROUP_LARGE = 6


def _group_sizes(n: int) -> list[int]:
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(GROUP_SIZES[0] if len(sizes) < GROUP_LARGE else GROUP_SIZES[1])
    return sizes


def merge_hits(recalled: Sequence[RetrievalHit], others: Sequence[RetrievalHit]
               ) -> list[RetrievalHit]:
    """Recalled turns and the other sources' hits, alternating by rank (recall first):
    neither crowds the other out of the retrieval share."""
    merged: list[RetrievalHit] = []
    for i in range(max(len(recalled), len(others))):
        merged += [h[i] for h in (recalled, others) if i < len(h)]
    return merged


def install(kx: Kairox) -> Recall:
    """Give ``kx`` recall: its compactor hands every new summary's turns to it."""
    recall = Recall(kx)
    kx.compactor.on_compacted.append(recall.on_compacted)
    return recall


__all__ = ["DOC_TYPE", "SOURCE", "Recall", "group_turns", "install", "merge_hits",
           "recall_space", "turn_document"]
