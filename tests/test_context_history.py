"""History from the event store: newest first, lazily paged, summaries replace ranges,
token counts stored once with each event."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kairox_core.config import ProfileConfig
from kairox_core.context import (
    CompactionState,
    ContextAssembler,
    EventHistory,
    counter_for_profile,
)
from kairox_core.context.history import with_tokens
from kairox_core.events import (
    AssistantMessageCompleted,
    ChunkDropped,
    CompactionSummary,
    FactPinned,
    ModelTokenDelta,
    SummaryEdited,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.store.event_store import EventStore

PROFILE = ProfileConfig(model="gpt-4o", context_window=100_000, reserve=1000)
PC = counter_for_profile(PROFILE)


def conversation(sid: str, n_turns: int) -> list:
    events = []
    for i in range(n_turns):
        t = f"t{i}"
        events.append(with_tokens(UserMessageAdded(session_id=sid, turn_id=t, text=f"q{i}"), PC))
        events.append(ModelTokenDelta(session_id=sid, turn_id=t, delta="raw"))
        if i % 3 == 0:
            events.append(
                with_tokens(
                    ToolInvocationCompleted(
                        session_id=sid,
                        turn_id=t,
                        tool_call_id=f"c{i}",
                        tool_name="f",
                        arguments="{}",
                        result=f"r{i}",
                    ),
                    PC,
                )
            )
        events.append(
            with_tokens(AssistantMessageCompleted(session_id=sid, turn_id=t, text=f"a{i}"), PC)
        )
    return events


@pytest.mark.slow
def test_newest_first_reads_only_what_it_needs(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "k.db")
    store.append_many(conversation("s", 3000))
    hist = EventHistory(store, "s", PC)
    units = []
    for unit in hist.newest_first():
        units.append(unit)
        if len(units) == 10:
            break
    assert [u.kind for u in units[:7]] == ["assistant", "user"] * 2 + ["assistant", "tool", "user"]
    assert units[0].messages[0]["content"] == "a2999"
    assert hist.pages_read == 1 and hist.rows_read <= 64
    every = list(EventHistory(store, "s", PC).newest_first())
    assert len(every) == 3000 * 2 + 1000
    assert [u.seq for u in every] == sorted((u.seq for u in every), reverse=True)
    store.close()


def test_stored_token_count_is_used_not_recounted(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "k.db")
    ev = with_tokens(UserMessageAdded(session_id="s", turn_id="t", text="hello"), PC)
    assert ev.tokens == PC.message({"role": "user", "content": "hello"})
    assert ev.token_counter == PC.key
    store.append(dataclasses.replace(ev, tokens=777))  # a marker value, to see it is used
    other = counter_for_profile(ProfileConfig(model="gpt-4", context_window=9000))
    store.append(with_tokens(UserMessageAdded(session_id="s", turn_id="u", text="x"), other))
    units = list(EventHistory(store, "s", PC).newest_first())
    assert units[1].tokens == 777
    # counted under another scheme (cl100k): counted again under ours
    assert units[0].tokens == PC.message({"role": "user", "content": "x"})
    store.close()


def test_summaries_replace_their_range_and_before_seq_hides_the_prompt(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "k.db")
    store.append_many(conversation("s", 10))  # 4 or 3 events per turn
    last = store.last_seq("s")
    state = CompactionState()
    summary = store.append(
        CompactionSummary(
            session_id="s",
            compaction_id="c1",
            summary="early talk",
            first_seq=1,
            last_seq=8,
            strategy="extractive",
        )
    )
    state.apply(store.read("s", types=["CompactionSummary"]))
    hist = EventHistory(store, "s", PC, before_seq=last, skip=state.covered_ranges())
    seqs = [u.seq for u in hist.newest_first()]
    assert seqs and max(seqs) < last and min(seqs) > 8
    assert state.summaries[0].seq == summary.seq


def test_compaction_state_folds_edits_drops_and_pins() -> None:
    state = CompactionState()
    events = [
        CompactionSummary(
            session_id="s",
            seq=10,
            compaction_id="a",
            summary="A1.\nA2.",
            first_seq=1,
            last_seq=5,
            strategy="x",
        ),
        FactPinned(session_id="s", seq=11, fact_id="f1", text="Budget is 5k."),
        SummaryEdited(
            session_id="s", seq=12, summary_seq=10, text="A1 edited.\nA2.", previous_text="A1.\nA2."
        ),
        CompactionSummary(
            session_id="s",
            seq=20,
            compaction_id="b",
            summary="B.",
            first_seq=12,
            last_seq=15,
            strategy="x",
        ),
        ChunkDropped(session_id="s", seq=21, summary_seq=10, chunk_index=1, text="A2."),
    ]
    state.apply(events)
    assert [s.text for s in state.summaries] == ["A1 edited.", "B."]
    assert state.covered_ranges() == [(1, 5), (12, 15)]
    assert [p.text for p in state.pinned] == ["Budget is 5k."]
    assert state.watermark == 21
    state.apply(
        [
            CompactionSummary(
                session_id="s",
                seq=30,
                compaction_id="c",
                summary="AB",
                first_seq=1,
                last_seq=15,
                strategy="x",
                folded_summaries=(10, 20),
            )
        ]
    )
    assert [(s.seq, s.text) for s in state.summaries] == [(30, "AB")]
    assert state.covered_ranges() == [(1, 15)]


@pytest.mark.slow
def test_assembly_over_event_history_fits_and_is_recent(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "k.db")
    store.append_many(conversation("s", 500))
    small = ProfileConfig(model="gpt-4o", context_window=300, reserve=0)
    a = ContextAssembler(small)
    hist = EventHistory(store, "s", a.counter)
    ctx = a.assemble("next?", history=hist)
    assert ctx.messages[-2] == {"role": "assistant", "content": "a499"}
    assert a.counter.count_messages(ctx.messages) == ctx.trace.total <= 300
    assert hist.rows_read < 200  # paged, not the whole session
    store.close()


def test_units_read_as_columns_equal_units_of_whole_events(tmp_path: Path) -> None:
    """The column decoding (``_unit_from_row``, with its fast path for a user message
    without attachments) renders exactly what the whole events render."""
    from kairox_core.context.history import CONVERSATION_TYPES, unit_from_event

    store = EventStore(tmp_path / "k.db")
    sid = "s"
    image = {"kind": "image", "filename": "cat.png", "data": "xx"}
    doc = {"kind": "document", "filename": "a.md", "text": "body <kairox:x> [memory y"}
    events = [
        with_tokens(UserMessageAdded(session_id=sid, turn_id="t1", text="plain"), PC),
        UserMessageAdded(session_id=sid, turn_id="t1", text="no count"),
        with_tokens(
            UserMessageAdded(session_id=sid, turn_id="t2", text="with", attachments=(image, doc)),
            PC,
        ),
        UserMessageAdded(session_id=sid, turn_id="t2", text="img", attachments=(image,)),
        with_tokens(AssistantMessageCompleted(session_id=sid, turn_id="t2", text="a"), PC),
        dataclasses.replace(
            with_tokens(UserMessageAdded(session_id=sid, turn_id="t3", text="other"), PC),
            token_counter="another-scheme",
        ),
        with_tokens(
            ToolInvocationCompleted(
                session_id=sid,
                turn_id="t3",
                tool_call_id="c1",
                tool_name="f",
                arguments='{"q": 1}',
                result="<kairox:memories>\n[memory fake]",
            ),
            PC,
        ),
        UserMessageAdded(session_id=sid, turn_id="", text=""),
    ]
    for event in events:
        store.append(event)
    stored = store.read(sid, types=CONVERSATION_TYPES)
    expected = [unit_from_event(e, PC) for e in reversed(stored)]
    got = list(EventHistory(store, sid, PC).newest_first())
    assert got == expected
    assert [u.seq for u in got] == [e.seq for e in reversed(stored)]
