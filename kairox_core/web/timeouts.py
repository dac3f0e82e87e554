"""Slow clients are cut off: a request's headers and its body each get a deadline.

uvicorn bounds only the idle time between two requests of a kept-alive connection
(``timeout_keep_alive``): a client that opens a connection and sends its headers or its
body a byte at a time holds a connection, a task and its buffers for as long as it
likes, and a few hundred of them hold the server. ``timed_protocol`` returns uvicorn's
h11 protocol with two deadlines on top, watched from the protocol's own state (no task
per connection): the request line and headers must arrive within ``header_timeout`` of
the connection opening (or of the previous response, on a kept-alive connection), and
the body within ``body_timeout`` of the headers. Past a deadline the connection is
closed; the app, if it was reading the body, sees a disconnect.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body deadlines (see the module)."""

    header_timeout = DEFAULT_HEADER_TIMEOUT
    body_timeout = DEFAULT_BODY_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_phase(None)
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Arm the deadline of the phase the client is in; keep it while the phase lasts
        (a byte now and then does not renew it)."""
        state = self.conn.their_state
        if state is h11.IDLE:
            self._set_phase("headers")
        elif state is h11.SEND_BODY:
            self._set_phase("body")
        else:
            self._set_phase(None)

    def _set_phase(self, phase: str | None) -> None:
        if phase == self._phase:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        if phase is not None and not self.transport.is_closing():
            wait = self.header_timeout if phase == "headers" else self.body_timeout
            self._deadline = self.loop.call_later(wait, self._expire, phase)

    def _expire(self, phase: str) -> None:
        self._deadline = None
        if self._phase != phase or self.transport.is_closing():
            return
        self.logger.info("closing a connection that sent its %s too slowly", phase)
        self.transport.close()


def timed_protocol(header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """``DeadlineH11Protocol`` with these deadlines, for uvicorn's ``http=``."""
    if header_timeout <= 0 or body_timeout <= 0:
        raise ValueError("header and body timeouts must be positive")
    return type(
        "DeadlineH11Protocol",
        (DeadlineH11Protocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
