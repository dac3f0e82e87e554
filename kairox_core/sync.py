"""One async core, one sync wrapper: every synchronous twin runs on one background loop.

``run_sync(coro)`` submits the coroutine to a single long-lived event loop in a daemon
thread (started on first use, one per process) and blocks until it finishes. So async
resources (retriever clients, provider connections, session locks) always live on the
same loop whatever sync call reaches them, no loop is created per call, and a sync call
also works from inside a running loop (a notebook cell, a Textual callback): the caller
waits, the work runs on the background loop. Interrupting the waiting caller (Ctrl-C)
cancels the coroutine on the loop, so a turn it was running releases its session.

A sync twin called *from* the background loop itself (an engine calling
``compact_sync``) would wait for itself forever; it is refused instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from kairox_core.errors import KairoxError

T = TypeVar("T")

# Blocking work (embedding, SQLite, model loading) goes to this loop's worker threads
# (``asyncio.to_thread``); a small fixed pool, so a thousand calls never mean more threads.
WORKERS = 4
WORKER_PREFIX = "kairox-worker"

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            loop.set_default_executor(
                ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=WORKER_PREFIX)
            )
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="kairox-sync-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def in_background_loop() -> bool:
    """True when called from the background loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and return its result (or raise its error)."""
    if in_background_loop():
        coro.close()
        raise KairoxError(
            "a synchronous Kairox call was made from Kairox's own event loop (inside an "
            "engine or an async call); use the async method (compact_locked, ...) instead"
        )
    future: Future[T] = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return future.result()
    except BaseException:
        # KeyboardInterrupt (or any interruption of the waiting thread): stop the work on
        # the loop too, so nothing keeps running (or holding a session) behind our back.
        if not future.done():
            future.cancel()
            with contextlib.suppress(BaseException):  # the interruption is re-raised
                future.result(timeout=5)
        raise


async def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop without blocking the caller's loop: the
    async counterpart of ``run_sync`` for code on its own loop that calls Kairox objects
    holding clients (a retriever) created on the background loop."""
    if in_background_loop():
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, background_loop()))


__all__ = [
    "WORKERS",
    "WORKER_PREFIX",
    "background_loop",
    "in_background_loop",
    "run_async",
    "run_sync",
]
