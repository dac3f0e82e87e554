"""A third-party retrieval source on an event loop of its own, in a thread of its own.

A composite's timeout (``asyncio.wait_for``) can only abandon a source that yields to
the loop and honours cancellation. A plugin's source that calls ``time.sleep`` (or any
blocking client) inside ``async def retrieve`` holds the whole loop, the turn with it;
one that swallows ``CancelledError`` keeps ``wait_for`` waiting for it to finish. Run on
a loop in another thread, neither can: the turn's loop awaits a future that the
timeout cancels at once, whatever the source does with its own loop.

Each ``IsolatedRetriever`` owns one daemon thread and loop for its whole life, so a
client the source creates (an HTTP connection pool bound to a loop) is always used on
the loop that created it. A source stuck in a call keeps its loop busy: later calls
queue behind it and time out too (the trace names the source each time), and nothing
waits for the thread at exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import RetrievalHit, WorkspaceRetriever

T = TypeVar("T")

CLOSE_WAIT = 5.0  # seconds a source's close() may take before it is left behind


def is_third_party(retriever: Any) -> bool:
    """A retriever whose class is not Kairox's own (a plugin's, or an application's)."""
    return not type(retriever).__module__.startswith("kairox_core.")


def _run(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


class IsolatedRetriever:
    """``retriever`` with every call run on its own loop in a daemon thread; the rest of
    its attributes (``index``, options) read through."""

    def __init__(self, retriever: WorkspaceRetriever) -> None:
        self.retriever = retriever
        self.name = retriever.name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._running = 0  # calls not finished on the source's loop (a stuck one stays)

    @property
    def capabilities(self) -> RetrieverCapabilities:
        """The wrapped retriever's declaration (it was checked when it was built)."""
        return self.retriever.capabilities

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.retriever, attr)

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run, args=(loop,), name=f"kairox-source-{self.name}", daemon=True
                )
                thread.start()
                self._loop = loop
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._own_loop())

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        """The source's hits; cancelling this await (the composite's timeout) returns
        at once and asks the source's own task to cancel, which it may ignore."""
        with self._lock:
            self._running += 1
        future = self._submit(self._call(query, k, filters))
        return await asyncio.wrap_future(future)

    async def _call(
        self, query: str, k: int, filters: Mapping[str, Any] | None
    ) -> list[RetrievalHit]:
        try:
            return list(await self.retriever.retrieve(query, k, filters))
        finally:  # on the source's loop: a call cancelled here but still running counts
            with self._lock:
                self._running -= 1

    async def close(self) -> None:
        """The source's own ``close`` on its loop (waited for up to ``CLOSE_WAIT``), then
        its loop stops. A source still stuck in a call is left as it is, thread and
        loop included (a daemon thread: nothing waits for it at exit)."""
        with self._lock:
            loop, self._loop = self._loop, None
            stuck = self._running > 0
        if loop is None:
            await self.retriever.close()
            return
        if stuck:
            return
        future = asyncio.run_coroutine_threadsafe(self.retriever.close(), loop)
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), CLOSE_WAIT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
