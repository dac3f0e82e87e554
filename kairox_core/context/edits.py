"""Edit a summary, pin a fact, drop a chunk of a summary: each one event, nothing deleted.

Core session state, not an engine's: functions over the event store and the session's
``CompactionState``. The session methods (``Session.pin_fact``, ``edit_summary``,
``drop_chunk``) call these while holding the session, so an edit never lands in the
middle of a turn or a compaction. A summary's *chunks* are the lines of its current
text (after earlier edits and drops), numbered from 0 as ``kairox summary show`` and the
Memory view list them.
"""

from __future__ import annotations

import uuid

from kairox_core.context.sources import CompactionState, SummaryItem
from kairox_core.errors import KairoxUserError
from kairox_core.events import (
    ChunkDropped,
    CompactionSummary,
    FactPinned,
    FactUnpinned,
    SummaryEdited,
)
from kairox_core.inputs import check_text
from kairox_core.store.protocol import EventLog
from kairox_core.summary_lines import chunks


def refresh(store: EventLog, session_id: str, state: CompactionState) -> CompactionState:
    """Fold compaction events newer than ``state`` has seen (cheap: indexed by type)."""
    state.apply(store.compaction_events(session_id, state.watermark))
    return state


def active_summary(
    store: EventLog, session_id: str, state: CompactionState, summary_seq: int
) -> SummaryItem:
    """The active summary stored at ``summary_seq``; a clear error otherwise."""
    state = refresh(store, session_id, state)
    for item in state.summaries:
        if item.seq == summary_seq:
            return item
    folded_into = [s.seq for s in state.summaries]
    stored = store.read(session_id, first_seq=summary_seq, last_seq=summary_seq)
    if stored and isinstance(stored[0], CompactionSummary):
        raise KairoxUserError(
            f"summary {summary_seq} of session {session_id} was folded into a later "
            f"summary; edit the active one instead (active: {folded_into or 'none'})"
        )
    raise KairoxUserError(
        f"no compaction summary at seq {summary_seq} in session {session_id}; "
        f"`kairox events {session_id} --type CompactionSummary` lists them"
    )


def pin_fact(
    store: EventLog,
    session_id: str,
    state: CompactionState,
    text: str,
    *,
    source_seq: int | None = None,
) -> FactPinned:
    text = check_text(text, "the pinned fact").strip()
    if not text:
        raise KairoxUserError("a pinned fact needs some text; give the fact to keep verbatim")
    event = store.append(
        FactPinned(
            session_id=session_id,
            fact_id=f"f-{uuid.uuid4().hex[:10]}",
            text=text,
            source_seq=source_seq,
        )
    )
    refresh(store, session_id, state)
    assert isinstance(event, FactPinned)
    return event


def unpin_fact(
    store: EventLog, session_id: str, state: CompactionState, fact_id: str
) -> FactUnpinned:
    pinned = {f.fact_id: f for f in refresh(store, session_id, state).pinned}
    fact = pinned.get(fact_id)
    if fact is None:
        known = ", ".join(pinned) or "none"
        raise KairoxUserError(
            f"no pinned fact '{fact_id}' in session {session_id} "
            f"(pinned: {known}); `kairox context {session_id}` lists them"
        )
    event = store.append(FactUnpinned(session_id=session_id, fact_id=fact_id, text=fact.text))
    refresh(store, session_id, state)
    assert isinstance(event, FactUnpinned)
    return event


def edit_summary(
    store: EventLog, session_id: str, state: CompactionState, summary_seq: int, text: str
) -> SummaryEdited:
    text = check_text(text, "the summary's text").strip()
    if not text:
        raise KairoxUserError(
            "the edited summary is empty; to remove parts of it, drop "
            "chunks (`kairox summary drop`) instead"
        )
    item = active_summary(store, session_id, state, summary_seq)
    event = store.append(
        SummaryEdited(
            session_id=session_id, summary_seq=summary_seq, text=text, previous_text=item.text
        )
    )
    refresh(store, session_id, state)
    assert isinstance(event, SummaryEdited)
    return event


def drop_chunk(
    store: EventLog, session_id: str, state: CompactionState, summary_seq: int, chunk_index: int
) -> ChunkDropped:
    item = active_summary(store, session_id, state, summary_seq)
    parts = chunks(item.text)
    if not 0 <= chunk_index < len(parts) or not parts[chunk_index].strip():
        listing = ", ".join(str(i) for i, c in enumerate(parts) if c.strip())
        raise KairoxUserError(
            f"summary {summary_seq} has no chunk {chunk_index}; its chunks are: {listing}"
        )
    event = store.append(
        ChunkDropped(
            session_id=session_id,
            summary_seq=summary_seq,
            chunk_index=chunk_index,
            text=parts[chunk_index],
        )
    )
    refresh(store, session_id, state)
    assert isinstance(event, ChunkDropped)
    return event
