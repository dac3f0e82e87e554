"""The session's history cache serves exactly what a fresh read of the store would."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.config import ProfileConfig
from kairox_core.context import CompactionState, EventHistory, counter_for_profile
from kairox_core.context.history import HistoryCache, with_tokens
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    MemoryProposed,
    ModelTokenDelta,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.store.event_store import EventStore

pytestmark = pytest.mark.slow

PC = counter_for_profile(ProfileConfig(model="gpt-4o", context_window=10_000))
PC_OTHER = counter_for_profile(ProfileConfig(model="gpt-4", context_window=10_000))


def turn_events(sid: str, i: int, tools: int) -> list:
    t = f"t{i}"
    evs = [
        with_tokens(UserMessageAdded(session_id=sid, turn_id=t, text=f"user {i}"), PC),
        ModelTokenDelta(session_id=sid, turn_id=t, delta="d"),
    ]
    for j in range(tools):
        evs.append(
            with_tokens(
                ToolInvocationCompleted(
                    session_id=sid,
                    turn_id=t,
                    tool_call_id=f"c{i}.{j}",
                    tool_name="f",
                    arguments="{}",
                    result=f"result {i}.{j}",
                ),
                PC,
            )
        )
    evs.append(
        with_tokens(AssistantMessageCompleted(session_id=sid, turn_id=t, text=f"reply {i}"), PC)
    )
    evs.append(
        MemoryProposed(session_id=sid, proposal_id=f"p{i}", scope="session", key=None, body="b")
    )
    return evs


ops = st.lists(
    st.one_of(
        st.tuples(st.just("turns"), st.integers(1, 40), st.integers(0, 2)),
        st.tuples(st.just("compact"), st.floats(0, 1), st.floats(0, 1)),
        st.tuples(st.just("read"), st.integers(0, 400), st.booleans()),
        st.tuples(st.just("trim"), st.integers(0, 300), st.just(0)),
        st.tuples(st.just("switch"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops)
def test_cache_matches_a_fresh_read(tmp_path_factory, operations) -> None:
    path: Path = tmp_path_factory.mktemp("cache") / "k.db"
    store = EventStore(path)
    cache = HistoryCache(store, "s")
    state = CompactionState()
    counter = PC
    n = 0
    try:
        for op, a, b in operations:
            if op == "turns":
                store.append_many(
                    itertools.chain.from_iterable(turn_events("s", n + i, b) for i in range(a))
                )
                n += a
            elif op == "compact":
                last = store.last_seq("s")
                if last < 2:
                    continue
                lo, hi = sorted((1 + int(a * (last - 1)), 1 + int(b * (last - 1))))
                store.append(
                    CompactionSummary(
                        session_id="s",
                        compaction_id=f"c{lo}",
                        summary="s",
                        first_seq=lo,
                        last_seq=hi,
                        strategy="t",
                    )
                )
                state.apply(
                    store.read("s", first_seq=state.watermark + 1, types=["CompactionSummary"])
                )
            elif op == "switch":
                counter = PC_OTHER if counter is PC else PC
            elif op == "trim":
                cache.trim(a)
            else:
                skip = state.covered_ranges()
                before = store.last_seq("s") if b else None
                expected = list(
                    EventHistory(store, "s", counter, before_seq=before, skip=skip).newest_first()
                )
                got = []
                for unit in cache.source(counter, before_seq=before, skip=skip):
                    if len(got) == a:
                        break  # a budget that stops early leaves the cache partly filled
                    got.append(unit)
                assert got == expected[:a]
        # and a full read at the end
        skip = state.covered_ranges()
        assert list(cache.source(counter, skip=skip)) == list(
            EventHistory(store, "s", counter, skip=skip).newest_first()
        )
    finally:
        store.close()


def test_a_warm_turn_reads_only_the_new_events(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "k.db")
    store.append_many(itertools.chain.from_iterable(turn_events("s", i, 1) for i in range(2000)))
    cache = HistoryCache(store, "s")
    first = list(itertools.islice(cache.source(PC), 300))
    assert cache.reader is not None and cache.reader.rows_read < 700
    store.append_many(turn_events("s", 2000, 0))
    src = cache.source(PC)
    second = list(itertools.islice(src, 302))
    assert cache.reader.rows_read == 2  # only the user message and the reply just added
    assert [u.messages[0]["content"] for u in second[:2]] == ["reply 2000", "user 2000"]
    assert second[2:] == first
    store.close()
