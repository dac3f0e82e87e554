"""One async core, one sync wrapper: the synchronous twins share one background loop."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core import Kairox
from kairox_core.capabilities import ProviderCapabilities
from kairox_core.chat.engine import ChatEngine
from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxError
from kairox_core.providers.base import ChatChunk
from kairox_core.sync import WORKER_PREFIX, WORKERS, run_sync

CONFIG = {
    "profiles": {"default": {"model": "gpt-4o", "context_window": 4000, "reserve": 500}},
}


@pytest.fixture
def kx(kairox_home: Path, tmp_path: Path) -> Iterator[Kairox]:
    k = Kairox.open(tmp_path / "kx.db", KairoxConfig.model_validate(CONFIG))
    yield k
    k.close()


def _loops() -> int:
    gc.collect()
    return sum(isinstance(o, asyncio.AbstractEventLoop) for o in gc.get_objects())


SOURCE_THREAD = "kairox-source"  # one short-lived daemon per blocking source call


def _threads() -> set[str]:
    """The live threads, worker threads of the background loop's pool left out, once the
    short-lived source threads (of this test or an earlier one) have finished."""
    for t in threading.enumerate():
        if t.name == SOURCE_THREAD:
            t.join(timeout=10)
    return {
        t.name
        for t in threading.enumerate()
        if not t.name.startswith(WORKER_PREFIX) and t.name != SOURCE_THREAD
    }


def _fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


async def test_a_sync_twin_works_inside_a_running_loop(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    turn = session.begin_turn_sync("hello from a notebook")
    turn.feed("hi")
    assert turn.complete_sync().text == "hi"
    assert session.run_turn_sync("again", "ok").text == "ok"
    assert kx.compact(session.id).status in {"skipped", "completed"}  # one type, never a coroutine
    assert not session.busy


@pytest.mark.slow
def test_a_thousand_sync_calls_leave_no_loop_thread_or_client_behind(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    session.run_turn_sync("the vault code is 1234", "noted")
    session.preview_sync("warm up")  # the background loop and the retriever exist from here
    retriever = session._retriever
    threads, loops, fds = _threads(), _loops(), _fds()
    for i in range(1000):
        session.preview_sync(f"what is the vault code? {i % 7}")
    after = _threads()
    # No thread per call (the pool's workers are bounded below). A thread of an earlier
    # test (a local HTTP server's request thread) may end meanwhile: only new ones count.
    assert after - threads == set()
    workers = [t for t in threading.enumerate() if t.name.startswith(WORKER_PREFIX)]
    assert len(workers) <= WORKERS  # blocking work shares one small pool
    assert _loops() <= loops
    assert _fds() <= fds
    assert session._retriever is retriever  # one client, reused on the one loop


def test_a_sync_call_from_the_background_loop_is_refused() -> None:
    async def inner() -> int:
        return 1

    async def outer() -> int:
        return run_sync(inner())

    with pytest.raises(KairoxError, match="own event loop"):
        run_sync(outer())
    assert run_sync(inner()) == 1  # the loop is still serving


async def test_a_cancelled_turn_releases_the_session(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    started = asyncio.Event()

    async def slow_turn() -> None:
        turn = await session.begin_turn("a long answer, please")
        async with turn:
            turn.feed("partial ")
            started.set()
            await asyncio.Event().wait()  # until cancelled

    task = asyncio.create_task(slow_turn())
    await started.wait()
    assert session.busy
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not session.busy
    assert [e.type for e in kx.events(session.id)][-2:] == ["UserMessageAdded", "ModelTokenDelta"]
    assert (await session.run_turn("next", "fine")).text == "fine"


class SlowProvider:
    capabilities = ProviderCapabilities()
    name = "slow"
    model = "slow-1"

    def __init__(self) -> None:
        self.streaming = asyncio.Event()

    async def stream(self, messages: Any, **kw: Any) -> AsyncIterator[ChatChunk]:
        yield ChatChunk(text="thinking")
        self.streaming.set()
        await asyncio.Event().wait()  # until cancelled
        yield ChatChunk(text="never")

    async def complete(self, messages: Any, **kw: Any) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        return None


async def test_a_cancelled_chat_turn_releases_the_session(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    provider = SlowProvider()
    engine = ChatEngine(kx, session, kx.config, provider=provider, provider_note="")  # type: ignore[arg-type]
    task = asyncio.create_task(engine.run_turn("tell me", lambda text: None))
    await provider.streaming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not session.busy
