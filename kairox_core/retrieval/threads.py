"""Blocking work of a retrieval source, run where a timeout can abandon it.

``asyncio.to_thread`` uses the loop's default executor, whose threads are joined when
the loop shuts down (``asyncio.run``) and again at interpreter exit: a knowledge base
hanging in a worker thread then holds the turn and the CLI long after the composite's
timeout gave up on it. ``run_blocking`` runs the call in a daemon thread of its own
that nothing joins; a result that arrives after the caller stopped waiting (or after
its loop closed) is dropped.

A source can also block the event loop itself (synchronous work inside ``retrieve``):
no timeout fires then, and every other source waits too. ``LoopClock`` drives a
source's coroutine step by step and adds up the time spent inside its steps, which
is time the loop was blocked by that source and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


async def run_blocking(fn: Callable[..., T], /, *args: Any, name: str = "kairox-source") -> T:
    """``fn(*args)`` in a daemon thread; cancelling the await abandons the thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():  # the caller timed out or was cancelled
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(fn, *args))
        except Exception as exc:
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


class LoopClock:
    """Seconds a coroutine held the event loop: the sum of its steps' durations."""

    def __init__(self) -> None:
        self.blocked = 0.0

    async def watch(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` with each of its steps timed."""
        return await self._drive(coro)

    @types.coroutine
    def _drive(self, coro: Coroutine[Any, Any, T]) -> Generator[Any, Any, T]:
        send: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            finally:
                self.blocked += time.perf_counter() - start
            try:
                send, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like go to the source
                send, error = None, exc
