"""The session actor: turns, compactions, profile switches and edits strictly in order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.compaction.base import CompactionOutput, CompactionRequest
from kairox_core.config import CompactionSection, KairoxConfig, ProfileConfig
from kairox_core.context.errors import ContextBudgetExceeded
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
    FactPinned,
    ProfileSwitched,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.providers.scripted import ScriptedProvider

# wait_for bounds below are no speed claim: they only stop a broken build from hanging
HANG_GUARD = 300


class Gated:
    """Summarises only once ``gate`` is set (an asyncio.Event made by the test)."""

    gate: asyncio.Event | None = None
    entered: asyncio.Event | None = None

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        assert Gated.gate is not None and Gated.entered is not None
        Gated.entered.set()
        await Gated.gate.wait()
        return CompactionOutput(f"{len(request.events)} events summarised")


class Boom:
    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        raise RuntimeError("strategy exploded")


class Plain:
    def summarize(self, request: CompactionRequest) -> CompactionOutput:  # sync is fine too
        return CompactionOutput(
            "\n".join([*request.previous_summaries, f"{len(request.events)} events"])
        )


class StrategyPlugin:
    @hookimpl
    def kairox_register_compaction_strategies(self, register: Callable[..., None]) -> None:
        register("gated", lambda **kw: Gated())
        register("boom", lambda **kw: Boom())
        register("plain", lambda **kw: Plain())


def config(strategy: str, **compaction: Any) -> KairoxConfig:
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(model="gpt-4o", context_window=700, reserve=100),
            "small": ProfileConfig(model="gpt-4o", context_window=400, reserve=50),
        },
        compaction=CompactionSection(
            strategy=strategy, keep_recent_exchanges=1, target_tokens=60, **compaction
        ),
    )


@pytest.fixture
def open_kx(
    kairox_home: Path, tmp_path: Path, register_plugin: Callable[[object, str], Any]
) -> Any:
    register_plugin(StrategyPlugin(), "test-strategies")
    opened: list[Kairox] = []

    def make(strategy: str = "plain", **compaction: Any) -> Kairox:
        kx = Kairox.open(tmp_path / f"kx{len(opened)}.db", config(strategy, **compaction))
        opened.append(kx)
        return kx

    yield make
    for kx in opened:
        kx.close()


def types_of(kx: Kairox, sid: str) -> list[str]:
    return [e.type for e in kx.events(sid)]


def seq_of(kx: Kairox, sid: str, cls: type[Event]) -> list[int]:
    return [e.seq or 0 for e in kx.events(sid) if isinstance(e, cls)]


async def turns(session: Any, n: int, words: int = 3) -> None:
    for i in range(n):
        await session.run_turn(f"q{i} " + "alpha " * words, f"a{i} " + "beta " * words)


async def spin(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_compaction_requested_during_a_turn_runs_after_it(open_kx: Any) -> None:
    kx = open_kx("plain")
    s = kx.session(workspace="w")
    await turns(s, 3)
    turn = await s.begin_turn("in flight")
    task = asyncio.create_task(kx.compact_async(s.id))
    await spin()
    assert not task.done() and ContextCompactionStarted.__name__ not in types_of(kx, s.id)
    turn.feed("still streaming")
    await turn.complete()
    result = await asyncio.wait_for(task, HANG_GUARD)
    assert result.ok
    reply = seq_of(kx, s.id, AssistantMessageCompleted)[-1]
    assert seq_of(kx, s.id, ContextCompactionStarted)[0] > reply


async def test_profile_switch_during_compaction_waits(open_kx: Any) -> None:
    kx = open_kx("gated")
    Gated.gate, Gated.entered = asyncio.Event(), asyncio.Event()
    s = kx.session(workspace="w")
    await turns(s, 3)
    compaction = asyncio.create_task(s.compact())
    await asyncio.wait_for(Gated.entered.wait(), HANG_GUARD)  # the strategy is mid-summary
    switch = asyncio.create_task(s.switch_profile("small"))
    pin = asyncio.create_task(s.pin_fact("queued behind the compaction"))
    await spin()
    assert not switch.done() and not pin.done() and s.profile == "default"
    Gated.gate.set()
    await asyncio.wait_for(asyncio.gather(compaction, switch, pin), HANG_GUARD)
    assert s.profile == "small"
    completed = seq_of(kx, s.id, ContextCompactionCompleted)[0]
    assert seq_of(kx, s.id, ProfileSwitched)[0] > completed
    assert seq_of(kx, s.id, FactPinned)[0] > seq_of(kx, s.id, ProfileSwitched)[0]


async def test_queued_work_runs_in_request_order_without_starving(open_kx: Any) -> None:
    kx = open_kx("plain")
    s = kx.session(workspace="w")
    await turns(s, 2)
    order: list[str] = []

    async def turn(i: int) -> None:
        t = await s.begin_turn(f"queued {i}")
        order.append(f"turn {i}")
        await asyncio.sleep(0)  # a turn that yields while in flight
        await t.complete(f"done {i}")

    async def compact(i: int) -> None:
        await s.compact()
        order.append(f"compact {i}")

    async def switch(name: str) -> None:
        await s.switch_profile(name)
        order.append(f"switch {name}")

    jobs = [
        turn(0),
        compact(0),
        turn(1),
        switch("small"),
        turn(2),
        compact(1),
        switch("default"),
        turn(3),
    ]
    tasks = []
    for job in jobs:  # started one by one: each queues behind the ones before
        tasks.append(asyncio.create_task(job))
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*tasks), HANG_GUARD)
    assert order == [
        "turn 0",
        "compact 0",
        "turn 1",
        "switch small",
        "turn 2",
        "compact 1",
        "switch default",
        "turn 3",
    ]
    assert not s.busy


async def test_a_strategy_that_raises_fails_and_the_session_goes_on(open_kx: Any) -> None:
    kx = open_kx("boom")
    s = kx.session(workspace="w")
    await turns(s, 12, words=20)  # passes the trigger: turn-end compaction fails
    failed = [e for e in kx.events(s.id) if isinstance(e, ContextCompactionFailed)]
    assert failed and "strategy exploded" in failed[0].reason
    names = types_of(kx, s.id)
    start = names.index("ContextCompactionStarted")
    assert names[start + 1] == "ContextCompactionFailed"
    assert "CompactionSummary" not in names
    result = await s.run_turn("and now?", "still here")
    assert result.text == "still here"
    assert seq_of(kx, s.id, UserMessageAdded)[-1] > failed[0].seq  # type: ignore[operator]
    manual = await s.compact()
    assert manual.status == "failed" and "strategy exploded" in manual.reason


async def test_budget_guard_refuses_what_cannot_fit_and_sends_nothing(open_kx: Any) -> None:
    kx = open_kx("boom")
    s = kx.session(workspace="w")
    provider = ScriptedProvider(["fine"])
    await turns(s, 12, words=20)
    assert seq_of(kx, s.id, ContextCompactionFailed)
    users = len(seq_of(kx, s.id, UserMessageAdded))
    with pytest.raises(ContextBudgetExceeded, match="nothing was sent"):
        turn = await s.begin_turn("huge " * 900)
        await provider.complete(turn.messages)  # never reached
    assert provider.calls == []
    assert len(seq_of(kx, s.id, UserMessageAdded)) == users  # nothing recorded
    assert not s.busy  # the refused turn released the session
    turn = await s.begin_turn("small again")
    assert turn.trace.total <= turn.trace.budget
    await turn.complete("ok")


async def test_disabled_or_running_elsewhere_is_skipped_at_turn_end(open_kx: Any) -> None:
    kx = open_kx("plain", enabled=False)
    s = kx.session(workspace="w")
    await turns(s, 12, words=20)
    skipped = [e for e in kx.events(s.id) if isinstance(e, ContextCompactionSkipped)]
    assert skipped and "disabled" in skipped[0].reason and skipped[0].trigger == "auto"
    assert "ContextCompactionStarted" not in types_of(kx, s.id)
    assert (await s.compact()).ok  # manual compaction still works when automatic is off

    kx2 = open_kx("plain")
    s2 = kx2.session(workspace="w")
    # another live process, mid-run: it holds the session's compaction lease
    assert kx2.storage.leases.acquire(f"compaction:{s2.id}", "c-other", ttl=600).ok
    kx2.events_store.append(
        ContextCompactionStarted(
            session_id=s2.id, compaction_id="c-other", first_seq=1, last_seq=2, strategy="plain"
        )
    )
    await turns(s2, 12, words=20)
    reasons = [e.reason for e in kx2.events(s2.id) if isinstance(e, ContextCompactionSkipped)]
    assert reasons and "another process" in reasons[0] and "c-other" in reasons[0]
    assert "CompactionSummary" not in types_of(kx2, s2.id)
    kx2.events_store.append(
        ContextCompactionCompleted(session_id=s2.id, compaction_id="c-other", summary_seq=0)
    )
    assert kx2.storage.leases.release(f"compaction:{s2.id}", "c-other")
    await turns(s2, 1, words=20)
    assert seq_of(kx2, s2.id, CompactionSummary)


def test_sync_calls_refuse_while_a_turn_is_open(open_kx: Any) -> None:
    from kairox_core.session import TurnInProgress

    kx = open_kx("plain")
    s = kx.session(workspace="w")
    turn = s.begin_turn_sync("open")
    for call in (
        lambda: s.pin_fact_sync("x"),
        lambda: s.compact_sync(),
        lambda: s.edit_summary_sync(1, "x"),
        lambda: s.drop_chunk_sync(1, 0),
    ):
        with pytest.raises(TurnInProgress):
            call()
    turn.complete_sync("done")
    assert s.pin_fact_sync("now it works").text == "now it works"


async def test_a_cancelled_compaction_is_closed_in_the_audit(open_kx: Any) -> None:
    kx = open_kx("gated")
    Gated.gate, Gated.entered = asyncio.Event(), asyncio.Event()
    s = kx.session(workspace="w")
    await turns(s, 3)
    task = asyncio.create_task(s.compact())
    await asyncio.wait_for(Gated.entered.wait(), HANG_GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    failed = [e for e in kx.events(s.id) if isinstance(e, ContextCompactionFailed)]
    assert failed and failed[0].reason == "cancelled"
    assert not s.busy
    Gated.gate.set()
    assert (await s.compact()).ok  # not mistaken for a run still going on
