"""The guard in front of every request: host, token, CSRF and body size.

One ASGI middleware, so no route can forget a check:

- **Host**: on a loopback bind only loopback host names are served, which defeats DNS
  rebinding (a hostile page whose name resolves to 127.0.0.1).
- **Token**: when one is set (required off loopback), every request carries it as
  ``Authorization: Bearer T``, or the ``kairox_token`` cookie that ``/?token=T`` sets
  (HttpOnly, SameSite=Strict) so the browser app never holds it in script.
- **CSRF**: a state-changing request (anything but GET/HEAD/OPTIONS) with an ``Origin``
  must come from this server's own origin, and must carry ``X-Kairox-CSRF: 1`` (a
  custom header, which a cross-site form cannot send and a cross-site ``fetch`` cannot
  send without a CORS preflight this server never grants). ``/v1/*`` (OpenAI clients,
  which cannot add the header) instead requires ``Content-Type: application/json``,
  which is preflighted too.
- **Body size**: ``Content-Length`` above the limit is refused at once (413); a body
  streamed without one is counted and cut off at the limit.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_HEADER = "x-kairox-csrf"
TOKEN_COOKIE = "kairox_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
DEFAULT_MAX_BODY = 1_048_576  # 1 MiB: far above any prompt or memory body


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


class BodyTooLarge(Exception):
    """Raised inside ``receive`` when a streamed body passes the limit."""


class Guard:
    """ASGI middleware applying the checks above; see the module docstring."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, bind_host: str, max_body: int = DEFAULT_MAX_BODY
    ) -> None:
        self.app = app
        self.token = token
        self.bind_host = bind_host
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._check(scope, headers)
        if refusal is not None:
            await _send_json(send, *refusal)
            return
        if self.token and scope["path"] == "/" and self._query_token(scope):
            await self._set_cookie_and_redirect(send)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _send_json(send, 413, f"request body over {self.max_body} bytes")
            return
        seen = 0

        async def bounded_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLarge
            return message

        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _send_json(send, 413, f"request body over {self.max_body} bytes")

    def _check(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if is_loopback(self.bind_host) and not is_loopback(name):
            return 421, f"host '{host}' is not served: this server answers loopback names only"
        if self.token and not self._authorised(scope, headers):
            return (
                401,
                "missing or wrong token: send 'Authorization: Bearer TOKEN' or open /?token=TOKEN",
            )
        if scope["method"] in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None and origin != f"{scope.get('scheme', 'http')}://{host}":
            return 403, f"cross-origin request from '{origin}' refused"
        if scope["path"].startswith("/v1/"):
            if not headers.get("content-type", "").startswith("application/json"):
                return 415, "send the request body as Content-Type: application/json"
            return None
        if headers.get(CSRF_HEADER) != "1":
            return 403, "state-changing requests need the header X-Kairox-CSRF: 1"
        return None

    def _authorised(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        given = ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        elif "cookie" in headers:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(headers["cookie"])
            except Exception:
                return False
            morsel = cookie.get(TOKEN_COOKIE)
            given = morsel.value if morsel is not None else ""
        if not given and scope["path"] == "/" and scope["method"] == "GET":
            given = self._query_token(scope)
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def _query_token(self, scope: Scope) -> str:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return str((query.get("token") or [""])[0])

    async def _set_cookie_and_redirect(self, send: Send) -> None:
        assert self.token is not None
        cookie = f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/"), (b"set-cookie", cookie.encode("latin-1"))],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _send_json(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
