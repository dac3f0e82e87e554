"""Blocking work of a retrieval source, run where a timeout can abandon it.

``asyncio.to_thread`` uses the loop's default executor, whose threads are joined when
the loop shuts down (``asyncio.run``) and again at interpreter exit: a knowledge base
hanging in a worker thread then holds the turn and the CLI long after the composite's
timeout gave up on it. ``run_blocking`` runs the call in a daemon thread that nothing
joins; a result that arrives after the caller stopped waiting (or after its loop
closed) is dropped. The daemon threads are reused: starting one per call would cost
every turn a thread start, which grows with the machine's load (``Thread.start`` waits
until the new thread runs). A call that hangs keeps its thread; the next call gets
another.

A source can also block the event loop itself (synchronous work inside ``retrieve``):
no timeout fires then, and every other source waits too. ``LoopClock`` drives a
source's coroutine step by step and adds up the time spent inside its steps, which
is time the loop was blocked by that source and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Literal, Protocol, TypeVar, TypeVarTuple, Unpack

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


IDLE_MAX = 8  # idle daemon threads kept for the next calls


class _Worker(threading.Thread):
    """A daemon thread that runs jobs one at a time, idle between them. A job returns
    what delivers its result: the thread is back among the idle ones before the caller
    resumes, so a caller's next call reuses it."""

    def __init__(self) -> None:
        super().__init__(name="kairox-blocking", daemon=True)
        self.jobs: queue.SimpleQueue[Callable[[], Callable[[], None]]] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            deliver = job()
            del job
            with _idle_lock:
                stay = len(_idle) < IDLE_MAX
                if stay:
                    _idle.append(self)
            deliver()
            del deliver
            if not stay:
                return


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _submit(job: Callable[[], Callable[[], None]]) -> None:
    with _idle_lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
        worker.start()
    worker.jobs.put(job)


async def run_blocking(
    fn: Callable[[Unpack[Ts]], T], /, *args: Unpack[Ts], name: str = "kairox-source"
) -> T:
    """``fn(*args)`` in a daemon thread; cancelling the await abandons the thread.
    (``name`` is kept for callers; the reused threads are named kairox-blocking.)"""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: tuple[Literal[True], T] | tuple[Literal[False], Exception]) -> None:
        if future.done():  # the caller timed out or was cancelled
            return
        if outcome[0]:
            future.set_result(outcome[1])
        else:
            future.set_exception(outcome[1])

    def work() -> Callable[[], None]:
        outcome: tuple[Literal[True], T] | tuple[Literal[False], Exception]
        try:
            outcome = (True, context.run(fn, *args))
        except Exception as exc:
            outcome = (False, exc)

        def deliver() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(settle, outcome)

        return deliver

    _submit(work)
    return await future


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...


def if_free(lock: _Lock, fn: Callable[[], T]) -> T | None:
    """``fn()`` under ``lock`` if the lock is free at once, else None without waiting:
    a quick probe the event loop may run itself (an empty source known as such), never
    queued behind a writer holding the database."""
    if not lock.acquire(blocking=False):
        return None
    try:
        return fn()
    finally:
        lock.release()


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
