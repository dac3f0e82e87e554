"""The compactor: planning in whole exchanges, provenance, folding, pin/edit/drop, events."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.compaction.base import CompactionOutput, CompactionRequest
from kairox_core.compaction.planning import Row, exchanges, oldest_stretch, with_folds
from kairox_core.config import CompactionSection, KairoxConfig, ProfileConfig
from kairox_core.context.sources import SummaryItem
from kairox_core.engines import CompactionResult, Engine
from kairox_core.errors import KairoxUserError
from kairox_core.events import (
    AssistantMessageCompleted,
    ChunkDropped,
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
    FactPinned,
    SummaryEdited,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.testing.engine_contract import EngineContract


class FirstLines:
    """A deterministic test strategy: one line per user message (its first words)."""

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        lines = [p for prev in request.previous_summaries for p in prev.split("\n") if p.strip()]
        lines += [
            f"user: {' '.join(e.text.split()[:6])}"
            for e in request.events
            if isinstance(e, UserMessageAdded)
        ]
        return CompactionOutput("\n".join(lines[-12:]), strategy="firstlines")


class StrategyPlugin:
    def __init__(self, name: str, factory: Callable[..., Any]) -> None:
        self.name, self.factory = name, factory

    @hookimpl
    def kairox_register_compaction_strategies(self, register: Callable[..., None]) -> None:
        register(self.name, self.factory)


def small_config(strategy: str = "firstlines", **compaction: Any) -> KairoxConfig:
    options = {"keep_recent_exchanges": 2, "target_tokens": 80, "strategy": strategy, **compaction}
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(model="gpt-4o", context_window=700, reserve=100),
            "tiny": ProfileConfig(model="gpt-4o", context_window=500, reserve=100),
        },
        compaction=CompactionSection(**options),
    )


@pytest.fixture
def strategies(register_plugin: Callable[[object, str], Any]) -> None:
    register_plugin(StrategyPlugin("firstlines", lambda **kw: FirstLines()), "firstlines")


@pytest.fixture
def kx(kairox_home: Path, tmp_path: Path, strategies: None) -> Any:
    k = Kairox.open(tmp_path / "kx.db", small_config())
    yield k
    k.close()


def by_type(kx: Kairox, sid: str, cls: type[Event]) -> list[Any]:
    return [e for e in kx.events(sid) if isinstance(e, cls)]


def talk(session: Any, n: int, start: int = 0, words: int = 12) -> None:
    for i in range(start, start + n):
        body = " ".join(f"w{i}x{j}" for j in range(words))
        session.run_turn_sync(f"question {i}: {body}", f"answer {i}: {body}")


# --- planning (pure) -----------------------------------------------------------------------


def rows(spec: str) -> list[Row]:
    """'u a t a | u a' -> rows with seqs 1.., one turn per group."""
    out: list[Row] = []
    seq = 0
    kinds = {
        "u": "UserMessageAdded",
        "a": "AssistantMessageCompleted",
        "t": "ToolInvocationCompleted",
    }
    for t, group in enumerate(spec.split("|")):
        for k in group.split():
            seq += 1
            out.append(Row(seq, kinds[k], f"t{t}", 10))
    return out


def test_exchanges_keep_tool_call_with_its_turn() -> None:
    exs = exchanges(rows("u t a | u a | u t t a"))
    assert [(e.first_seq, e.last_seq) for e in exs] == [(1, 3), (4, 5), (6, 9)]


def test_oldest_stretch_keeps_recent_and_stops_at_a_summary() -> None:
    r = rows("u a | u a | u a | u a | u a")
    stretch = oldest_stretch(r, [], keep_recent=2)
    assert [(e.first_seq, e.last_seq) for e in stretch] == [(1, 2), (3, 4), (5, 6)]
    # seqs 3-4 were summarised: the oldest stretch is turn 0 alone
    left = [x for x in r if not 3 <= x.seq <= 4]
    assert [(e.first_seq, e.last_seq) for e in oldest_stretch(left, [(3, 4)], 1)] == [(1, 2)]
    assert oldest_stretch(r, [], keep_recent=5) == []


def test_with_folds_widens_over_overlapped_and_earlier_summaries() -> None:
    s1 = SummaryItem(seq=50, first_seq=1, last_seq=10, text="a")
    s2 = SummaryItem(seq=60, first_seq=20, last_seq=30, text="b")
    assert with_folds(25, 40, [s1, s2], fold_before=False) == (20, 40, (s2,))
    assert with_folds(35, 40, [s1, s2], fold_before=True) == (1, 40, (s1, s2))
    assert with_folds(35, 40, [s1, s2], fold_before=False) == (35, 40, ())


# --- runs ----------------------------------------------------------------------------------


def test_manual_compaction_of_a_range_leaves_newer_history(kx: Kairox) -> None:
    kx.config.compaction  # noqa: B018 - the config is the small one
    s = kx.session(workspace="w")
    talk(s, 3, words=2)  # under the trigger: no automatic compaction
    assert not by_type(kx, s.id, ContextCompactionStarted)
    users = by_type(kx, s.id, UserMessageAdded)
    result = kx.compact(s.id, users[0].seq, users[1].seq)  # widened to whole exchanges
    assert result.ok, result
    summary = by_type(kx, s.id, CompactionSummary)[0]
    replies = by_type(kx, s.id, AssistantMessageCompleted)
    assert (summary.first_seq, summary.last_seq) == (users[0].seq, replies[1].seq)
    assert summary.strategy == "firstlines" and summary.tokens_in > 0 < summary.tokens_out
    ctx = s.preview_sync("next")
    text = "\n".join(str(m.get("content")) for m in ctx.messages)
    assert "question 2" in text  # newer history intact, verbatim
    history = [str(m.get("content")) for m in ctx.messages if m["role"] != "system"]
    assert not any("answer 0" in m for m in history)  # replaced in history ...
    assert "user: question 0:" in text  # ... by the summary
    assert len(by_type(kx, s.id, UserMessageAdded)) == 3  # originals stay


def test_nothing_to_compact_is_skipped_with_a_reason(kx: Kairox) -> None:
    s = kx.session(workspace="w")
    talk(s, 2, words=2)
    result = kx.compact(s.id)  # only the 2 recent exchanges: kept verbatim
    assert result.status == "skipped" and "keep_recent_exchanges" in result.reason
    skipped = by_type(kx, s.id, ContextCompactionSkipped)
    assert skipped[-1].trigger == "manual"
    with pytest.raises(KairoxUserError, match="is empty"):
        kx.compact(s.id, 9, 3)


def test_auto_compaction_folds_and_provenance_chains_back(
    tmp_path: Path, kairox_home: Path, strategies: None
) -> None:
    kx = Kairox.open(tmp_path / "f.db", small_config(summaries_share=0.05))
    s = kx.session(workspace="w")
    talk(s, 30)
    summaries = by_type(kx, s.id, CompactionSummary)
    assert len(summaries) >= 3
    assert any(x.folded_summaries for x in summaries)
    by_seq = {x.seq: x for x in summaries}
    for x in summaries:  # a fold's range is the union of what it folded and its own stretch
        for f in x.folded_summaries:
            assert x.first_seq <= by_seq[f].first_seq and by_seq[f].last_seq <= x.last_seq
    first_user = by_type(kx, s.id, UserMessageAdded)[0].seq
    state = s.refresh_compaction()
    assert state.covered_ranges()[0][0] == first_user  # the chain reaches the first turn
    kx.close()


def test_pin_edit_drop_are_events_and_the_next_turn_sees_them(kx: Kairox) -> None:
    s = kx.session(workspace="w")
    talk(s, 4, words=2)
    assert kx.compact(s.id).ok
    seq = s.refresh_compaction().summaries[0].seq
    pin = s.pin_fact_sync("The launch code name is BLUE-HERON-7.")
    assert isinstance(pin, FactPinned)
    s.edit_summary_sync(seq, "first line kept\nsecond line to drop\nthird line")
    dropped = s.drop_chunk_sync(seq, 1)
    assert isinstance(dropped, ChunkDropped) and dropped.text == "second line to drop"
    text = "\n".join(str(m.get("content")) for m in s.preview_sync("q").messages)
    assert "The launch code name is BLUE-HERON-7." in text
    assert "first line kept" in text and "third line" in text
    assert "second line to drop" not in text
    edited = by_type(kx, s.id, SummaryEdited)[0]
    assert edited.previous_text.startswith("user: question 0")  # the original stays
    with pytest.raises(KairoxUserError, match="no chunk 1"):
        s.drop_chunk_sync(seq, 1)
    with pytest.raises(KairoxUserError, match="no compaction summary at seq 2"):
        s.edit_summary_sync(2, "x")
    with pytest.raises(KairoxUserError, match="needs some text"):
        s.pin_fact_sync("  ")
    # a later edit starts from the text with the drop applied: the drop does not linger
    s.edit_summary_sync(seq, "second line to drop")
    assert s.refresh_compaction().summaries[0].text == "second line to drop"


def test_on_compacted_engines_get_summary_and_originals(
    kairox_home: Path, tmp_path: Path, strategies: None, register_plugin: Any
) -> None:
    seen: list[tuple[int, list[int]]] = []

    class Index(Engine):
        async def on_compacted(self, session: Any, compaction: CompactionResult) -> None:
            assert compaction.summary is not None
            seen.append((compaction.summary.seq or 0, [e.seq for e in compaction.originals]))

    class Broken(Engine):
        name = "broken"

        async def on_compacted(self, session: Any, compaction: CompactionResult) -> None:
            raise RuntimeError("index down")

    class Plugin:
        @hookimpl
        def kairox_register_engines(self, register: Any) -> None:
            register("index", lambda kx: Index())
            register("broken", lambda kx: Broken())

    register_plugin(Plugin(), "observers")
    kx = Kairox.open(tmp_path / "observed.db", small_config())
    s = kx.session(workspace="w")
    talk(s, 4, words=2)
    result = kx.compact(s.id)
    assert result.ok and "index down" in result.notes[0] and "broken" in result.notes[0]
    summary = by_type(kx, s.id, CompactionSummary)[0]
    assert seen[0][0] == summary.seq
    conversation = [
        e.seq
        for e in kx.events(s.id)
        if isinstance(e, UserMessageAdded | AssistantMessageCompleted)
    ]
    assert seen[0][1] == [q for q in conversation if summary.first_seq <= q <= summary.last_seq]
    completed = by_type(kx, s.id, ContextCompactionCompleted)
    assert completed[0].summary_seq == summary.seq
    kx.close()


def test_secrets_from_any_strategy_are_redacted_before_storing(
    kairox_home: Path,
    tmp_path: Path,
    register_plugin: Callable[[object, str], Any],
) -> None:
    class Leaky:
        async def summarize(self, request: CompactionRequest) -> CompactionOutput:
            return CompactionOutput(
                "Deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789 "
                "to https://bob:hunter2@example.com today."
            )

    register_plugin(StrategyPlugin("leaky", lambda **kw: Leaky()), "leaky")
    kx = Kairox.open(tmp_path / "leak.db", small_config("leaky"))
    s = kx.session(workspace="w")
    talk(s, 3, words=2)
    assert kx.compact(s.id).ok
    stored = by_type(kx, s.id, CompactionSummary)[0].summary
    assert "ghp_abcdefghijklmnop" not in stored and "hunter2" not in stored
    assert "Deploy with token" in stored and "today." in stored
    kx.close()


def test_a_strategy_is_checked_against_its_protocol(
    kairox_home: Path, tmp_path: Path, register_plugin: Callable[[object, str], Any]
) -> None:
    class OnlyCompact:  # the old probed-for name is not enough: summarize is the protocol
        async def compact(self, request: CompactionRequest) -> CompactionOutput:
            return CompactionOutput("never used")

    register_plugin(StrategyPlugin("nosummary", lambda **kw: OnlyCompact()), "nosummary")
    with Kairox.open(tmp_path / "p.db", small_config("nosummary")) as kx:
        s = kx.session(workspace="w")
        talk(s, 4, words=2)
        result = kx.compact(s.id)
        assert result.status == "failed" and "without a summarize(request)" in result.reason
        assert "plugin 'nosummary'" in result.reason


def test_a_manual_range_past_the_end_never_covers_later_turns(kx: Any) -> None:
    s = kx.session(workspace="w")
    talk(s, 5, words=2)
    last = kx.events_store.last_seq(s.id)
    result = kx.compact(s.id, 1, last + 10)
    assert result.ok
    replies = by_type(kx, s.id, AssistantMessageCompleted)
    assert result.last_seq == replies[-1].seq  # the newest message, not beyond
    talk(s, 1, start=5, words=2)
    ranges = s.refresh_compaction().covered_ranges()
    newest = [e.seq for e in kx.events(s.id) if getattr(e, "turn_id", None) == replies[-1].turn_id]
    later = [e for e in kx.events(s.id) if isinstance(e, UserMessageAdded)][-1]
    assert not any(a <= later.seq <= b for a, b in ranges)
    assert all(any(a <= q <= b for a, b in ranges) for q in newest)


@pytest.mark.slow
class TestCompactionEngineContract(EngineContract):
    engine_name = "compaction"
