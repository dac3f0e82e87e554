"""The session's history path (projection rows, cache, running sums, ``within``) gives
the assembler exactly what a plain reference gives: units rebuilt from the stored
events' JSON, filtered by hand, walked newest first until one does not fit."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.config import ProfileConfig
from kairox_core.context import CompactionState, ContextAssembler, counter_for_profile
from kairox_core.context.history import CONVERSATION_TYPES, HistoryCache, with_tokens
from kairox_core.context.sources import HistoryUnit, ListHistory
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    ModelTokenDelta,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.store.event_store import EventStore

PROFILES = (
    ProfileConfig(model="gpt-4o", context_window=3_000, reserve=200),
    ProfileConfig(model="gpt-4o", context_window=1_200, reserve=100),
    ProfileConfig(model="gpt-4", context_window=2_500, reserve=300),  # cl100k: recounted
)
WORDS = ("alpha", "beta", "gamma", "delta", "<kairox:x>", "[memory y]", "é", "日本", "42")

texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=60).map(" ".join)
attachment = st.one_of(
    st.fixed_dictionaries({"kind": st.just("image"), "filename": st.sampled_from(["a.png", ""])}),
    st.fixed_dictionaries({"kind": st.just("file"), "filename": st.just("n.txt"), "text": texts}),
)
turn = st.tuples(
    texts,  # user text
    st.lists(attachment, max_size=2),
    st.lists(st.tuples(texts, texts), max_size=2),  # tool calls: (arguments, result)
    st.one_of(st.none(), texts),  # the reply (None: the turn was aborted)
)
step = st.tuples(
    st.lists(turn, min_size=0, max_size=12),  # turns appended before this assembly
    st.one_of(st.none(), st.tuples(st.floats(0, 1), st.floats(0, 1))),  # a compaction
    st.integers(0, len(PROFILES) - 1),
    st.booleans(),  # before_seq at the newest prompt
    st.booleans(),  # recalled hits for some seqs
    st.integers(0, 4_000),  # trim the cache to this many tokens afterwards
)


def append_turn(store: EventStore, n: int, spec: tuple[Any, ...], pc: Any) -> None:
    text, atts, tools, reply = spec
    t = f"t{n}"
    events: list[Any] = [
        with_tokens(
            UserMessageAdded(session_id="s", turn_id=t, text=text, attachments=tuple(atts)), pc
        ),
        ModelTokenDelta(session_id="s", turn_id=t, delta="d"),
    ]
    for i, (args, result) in enumerate(tools):
        events.append(
            with_tokens(
                ToolInvocationCompleted(
                    session_id="s",
                    turn_id=t,
                    tool_call_id=f"c{n}.{i}",
                    tool_name="look",
                    arguments=args,
                    result=result,
                ),
                pc,
            )
        )
    if reply is not None:
        events.append(
            with_tokens(AssistantMessageCompleted(session_id="s", turn_id=t, text=reply), pc)
        )
    store.append_many(events)


def reference_units(
    store: EventStore, pc: Any, before: int | None, skip: list[tuple[int, int]]
) -> list[HistoryUnit]:
    """Newest first, straight from the events' JSON (no projection, no cache)."""
    from kairox_core.context.history import unit_from_event

    out = []
    for event in reversed(store.read("s", types=CONVERSATION_TYPES)):
        seq = event.seq or 0
        if before is not None and seq >= before:
            continue
        if any(a <= seq <= b for a, b in skip):
            continue
        unit = unit_from_event(event, pc)
        assert unit is not None
        out.append(unit)
    return out


def plain_rule(units: list[HistoryUnit], room: int) -> list[HistoryUnit]:
    """Newest first, stop at the first that does not fit, never open with an orphan."""
    taken, used = [], 0
    for unit in units:
        if used + unit.tokens > room:
            while taken and taken[-1].kind != "user":
                taken.pop()
            break
        taken.append(unit)
        used += unit.tokens
    return taken


def recalled_for(units: list[HistoryUnit]) -> list[RetrievalHit]:
    hits = []
    for unit in units[::3]:
        meta = {"seq": unit.seq, "speaker": unit.kind, "date": "2026-12-01", "session_id": "s"}
        hits.append(
            RetrievalHit(
                text=f"turn {unit.seq}",
                score=1.0,
                source="recall",
                doc_id=f"t{unit.seq}",
                metadata=meta,
            )
        )
    return hits


@pytest.mark.slow
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(step, min_size=1, max_size=6))
def test_cached_assembly_is_the_reference_assembly(tmp_path_factory: Any, steps: Any) -> None:
    path: Path = tmp_path_factory.mktemp("window") / "k.db"
    store = EventStore(path)
    cache = HistoryCache(store, "s")
    state = CompactionState()
    writer = counter_for_profile(PROFILES[0])
    n = 0
    try:
        for turns, compaction, profile_at, before_prompt, recall, keep in steps:
            for spec in turns:
                append_turn(store, n, spec, writer)
                n += 1
            last = store.last_seq("s")
            if compaction is not None and last >= 2:
                lo, hi = sorted(1 + int(f * (last - 1)) for f in compaction)
                store.append(
                    CompactionSummary(
                        session_id="s",
                        compaction_id=f"c{lo}.{hi}",
                        summary="summary",
                        first_seq=lo,
                        last_seq=hi,
                        strategy="t",
                    )
                )
                state.apply(store.read("s", first_seq=state.watermark + 1))
            profile = PROFILES[profile_at]
            assembler = ContextAssembler(profile)
            pc = assembler.counter
            skip = state.covered_ranges()
            before = None
            if before_prompt:
                users = store.read("s", types=["UserMessageAdded"])
                before = users[-1].seq if users else None
            ref = reference_units(store, pc, before, skip)
            hits = recalled_for(ref) if recall else []
            got = assembler.assemble(
                "what now?",
                history=cache.source(pc, before_seq=before, skip=skip),
                recalled=hits,
            )
            expected = assembler.assemble(
                "what now?", history=ListHistory(tuple(reversed(ref))), recalled=hits
            )
            assert got.messages == expected.messages
            assert got.trace.as_dict() == expected.trace.as_dict()
            room = got.trace.layer("history").limit
            assert room is not None
            chosen = list(reversed(plain_rule(ref, room)))
            history = [dict(m) for u in chosen for m in u.messages]
            start = len(got.messages) - 1 - len(history)
            assert got.messages[start:-1] == history
            # ``within`` at the edges: a room that the newest k units fill exactly, and one less
            sums = list(itertools.accumulate(u.tokens for u in ref))
            for k in {0, 1, len(sums) // 2, len(sums) - 1}:
                for room in (sums[k] - 1, sums[k]) if 0 <= k < len(sums) else ():
                    view = cache.source(pc, before_seq=before, skip=skip)
                    fit = len([s for s in sums if s <= room])
                    assert view.within(room) == (ref[:fit], ref[fit] if fit < len(ref) else None)
            cache.trim(keep)
    finally:
        store.close()


@pytest.mark.slow
def test_a_long_session_reads_about_the_rows_its_window_needs(tmp_path: Path) -> None:
    """Cold: the first page tells the tokens per unit, the next is sized to the rest."""
    pc = counter_for_profile(PROFILES[0])
    store = EventStore(tmp_path / "k.db")
    store.append_many(
        itertools.chain.from_iterable(
            [
                with_tokens(UserMessageAdded(session_id="s", turn_id=f"t{i}", text="q " * 30), pc),
                with_tokens(
                    AssistantMessageCompleted(session_id="s", turn_id=f"t{i}", text="a " * 30), pc
                ),
            ]
            for i in range(5_000)
        )
    )
    cache = HistoryCache(store, "s")
    taken, over = cache.source(pc).within(20_000)
    assert over is not None and sum(u.tokens for u in taken) <= 20_000
    assert sum(u.tokens for u in taken) + over.tokens > 20_000
    assert cache.reader is not None
    assert cache.reader.pages_read <= 3 and cache.reader.rows_read < 1.25 * len(taken) + 64
    # warm: nothing new, nothing read
    again, _ = cache.source(pc).within(20_000)
    assert again == taken and cache.reader.rows_read == 0
    store.close()


def test_migration_backfills_the_projection_of_an_older_database(tmp_path: Path) -> None:
    """A database written before the projection (events schema 1) gets it filled on open:
    history then reads what the events' JSON says."""
    import json

    from kairox_core.store import event_store
    from kairox_core.store.connection import connect
    from kairox_core.store.migrations import migrate

    pc = counter_for_profile(PROFILES[0])
    path = tmp_path / "old.db"
    conn = connect(path)
    migrate(conn, event_store.COMPONENT, event_store.MIGRATIONS[:1])
    events = []
    seq = 0
    for n, spec in enumerate(
        [
            ("hi", ({"kind": "image", "filename": "a.png"},), (("{}", "res"),), "yes"),
            ("again", (), (), None),
        ]
    ):
        text, atts, tools, reply = spec
        batch = [
            with_tokens(
                UserMessageAdded(session_id="s", turn_id=f"t{n}", text=text, attachments=atts), pc
            )
        ]
        batch += [
            with_tokens(
                ToolInvocationCompleted(
                    session_id="s",
                    turn_id=f"t{n}",
                    tool_call_id="c",
                    tool_name="f",
                    arguments=a,
                    result=r,
                ),
                pc,
            )
            for a, r in tools
        ]
        if reply:
            batch.append(
                with_tokens(
                    AssistantMessageCompleted(session_id="s", turn_id=f"t{n}", text=reply), pc
                )
            )
        for event in batch:
            seq += 1
            event = event.with_seq(seq)
            events.append(event)
            conn.execute(
                "INSERT INTO events (session_id, seq, type, version, created_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                ("s", seq, event.type, 1, event.created_at, json.dumps(event.to_dict())),
            )
    conn.close()
    store = EventStore(path)
    try:
        cache = HistoryCache(store, "s")
        assert list(cache.source(pc)) == reference_units(store, pc, None, [])
        assert len(store.history_rows("s")) == len(events)
    finally:
        store.close()


def test_history_tokens_is_the_walk_that_stops_past_the_limit(tmp_path: Path) -> None:
    """The turn-end check's count (from the running sums) is what adding units newest
    first until the total passes ``limit`` gives, for every limit around the edges."""
    from kairox_core import Kairox
    from kairox_core.config import KairoxConfig

    cfg = KairoxConfig.model_validate(
        {"compaction": {"enabled": False}, "recall": {"enabled": False}}
    )
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        s = kx.session(workspace="w")
        for i in range(12):
            s.run_turn_sync(f"question {i} " * (i % 4 + 1), f"answer {i} " * (i % 3 + 1))
        s.pin_fact_sync("keep this")
        counter = s.assembler().counter
        units = list(s._history.source(counter))
        base = s.history_tokens(limit=0) - units[0].tokens  # the pinned fact's share
        edges = itertools.accumulate(u.tokens for u in units)
        for limit in {0, base - 1, base, *(base + e + d for e in edges for d in (-1, 0, 1))}:
            total = base
            for unit in units:
                total += unit.tokens
                if total > limit:
                    break
            assert s.history_tokens(limit=limit) == total
        assert s.history_tokens() == base + sum(u.tokens for u in units)


def test_a_range_no_longer_replaced_is_read_again(tmp_path: Path) -> None:
    """Summaries only widen what they replace, but should one range stop being replaced
    (a summary edited away by hand), the cache does not serve the gap it never kept."""
    pc = counter_for_profile(PROFILES[0])
    store = EventStore(tmp_path / "k.db")
    for n in range(10):
        append_turn(store, n, (f"q{n}", [], [], f"a{n}"), pc)
    cache = HistoryCache(store, "s")
    assert list(cache.source(pc, skip=[(5, 12)])) == reference_units(store, pc, None, [(5, 12)])
    assert list(cache.source(pc, skip=[(3, 14)])) == reference_units(store, pc, None, [(3, 14)])
    assert list(cache.source(pc, skip=[(3, 8)])) == reference_units(store, pc, None, [(3, 8)])
    assert list(cache.source(pc)) == reference_units(store, pc, None, [])
    store.close()
