"""The guard in front of every request: host, token, CSRF and body size.

One ASGI middleware, so no route can forget a check:

- **Host**: without a token only ``127.0.0.1``, ``localhost``,
  ``[::1]`` and the exact ``--host`` are served, each with the server's port, compared
  exactly (case aside) with the ``Host`` header. This defeats DNS rebinding: a hostile
  page whose name resolves to 127.0.0.1 (``127.0.0.1.evil.example``, ``x.nip.io``) sends
  its own name. Loopback is decided by parsing an IP address, never by a prefix.
- **Token**: when one is set (required off loopback), every request carries it as
  ``Authorization: Bearer T``, or the ``kairox_token`` cookie that ``/?token=T`` sets
  (HttpOnly, SameSite=Strict) so the browser app never holds it in script.
- **CSRF**: a state-changing request (anything but GET/HEAD/OPTIONS) with an ``Origin``
  must come from this server's own origin, and must carry ``X-Kairox-CSRF: 1`` (a
  custom header, which a cross-site form cannot send and a cross-site ``fetch`` cannot
  send without a CORS preflight this server never grants). ``/v1/*`` (OpenAI clients,
  which cannot add the header) instead requires ``Content-Type: application/json``,
  which is preflighted too (so does ``/mcp`` when the guard fronts the MCP server).
- **Body size**: ``Content-Length`` above the limit is refused at once (413); a body
  streamed without one (chunked) is read here, counted, and refused with 413 at the
  limit, before the app sees any of it.
- **JSON values**: a JSON body with ``NaN``/``Infinity``, an integer beyond 64 bits, a
  lone surrogate in a string, or nesting too deep for the parser is refused with 400
  and what was wrong where (kairox_core/inputs.py), for every route at once.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from kairox_core.attachments import MAX_BYTES as MAX_ATTACHMENT_BYTES
from kairox_core.inputs import json_problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_HEADER = "x-kairox-csrf"
TOKEN_COOKIE = "kairox_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# the largest attachment (attachments.MAX_BYTES) as base64 in JSON, plus 1 MiB for the
# prompt: an upload or an OpenAI file part the attachment limit accepts gets through
DEFAULT_MAX_BODY = -(-MAX_ATTACHMENT_BYTES // 3) * 4 + 1_048_576
JSON_ONLY_PREFIXES = ("/v1/",)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` or a loopback IP address (127.0.0.0/8, ::1), by parsing
    it as an address: ``127.0.0.1.evil.example`` is a name anyone's DNS can point
    anywhere, not loopback."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """``host`` as it appears in a ``Host`` header (an IPv6 address in brackets)."""
    name = host.strip().lower()
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def allowed_hosts(bind_host: str, port: int | None) -> frozenset[str]:
    """Every ``Host`` header value served without a token: the loopback names and the
    exact bind host, with the port (and without it on port 80, as browsers send it)."""
    names = {*LOOPBACK_NAMES, host_name(bind_host)}
    values = {f"{name}:{port}" for name in names} if port else set()
    if port in (80, None):
        values |= names
    return frozenset(values)


class Guard:
    """ASGI middleware applying the checks above; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        bind_host: str,
        port: int | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        json_only: tuple[str, ...] = JSON_ONLY_PREFIXES,
    ) -> None:
        """``port``: the configured one, used when the ASGI server does not say which
        it listens on. ``json_only``: path prefixes whose clients cannot send the CSRF
        header (OpenAI and MCP clients): a POST there must be JSON instead."""
        self.app = app
        self.token = token
        self.bind_host = bind_host
        self.port = port
        self.max_body = max_body
        self.json_only = json_only
        # with a token, the token decides (a rebound page cannot send it: the cookie
        # belongs to the server's own name); without one, the exact Host does
        self.check_host = token is None

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
        body = await self._read_body(receive)
        if body is None:
            await _send_json(send, 413, f"request body over {self.max_body} bytes")
            return
        if scope["method"] not in SAFE_METHODS and _is_json(headers):
            first = await body()
            problem = json_refusal(first.get("body", b""))
            if problem is not None:
                await _send_json(send, 400, problem)
                return
            body = _replaying(first, receive)
        await self.app(scope, body, send)

    async def _read_body(self, receive: Receive) -> Receive | None:
        """The whole request body read up to the limit (None past it), as a ``receive``
        that replays it and then hands over to the server's (for disconnects). Reading
        it here, not inside the app, makes an over-long chunked body a 413: a framework
        that parses the body turns any error raised while reading into its own 400."""
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                break
        return _replaying(message, receive)

    def _served_port(self, scope: Scope) -> int | None:
        server = scope.get("server")
        if server and isinstance(server[1], int) and server[1]:
            return server[1]
        return self.port or None

    def _check(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.check_host:
            allowed = allowed_hosts(self.bind_host, self._served_port(scope))
            if host.strip().lower() not in allowed:
                return (
                    421,
                    f"host '{host}' is not served: without a token this server answers "
                    f"only {', '.join(sorted(allowed))}",
                )
        if self.token and not self._authorised(scope, headers):
            return (
                401,
                "missing or wrong token: send 'Authorization: Bearer TOKEN' or open /?token=TOKEN",
            )
        if scope["method"] in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{host}".lower()
        if origin is not None and origin.lower() != own:
            return 403, f"cross-origin request from '{origin}' refused"
        if scope["path"].startswith(self.json_only):
            if scope["method"] != "POST":
                return None  # any other method is preflighted cross-site anyway
            if not headers.get("content-type", "").lower().startswith("application/json"):
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


def _replaying(message: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``message`` first, then the server's messages."""
    pending: list[Message] = [message]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _is_json(headers: dict[str, str]) -> bool:
    kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind in ("", "application/json") or kind.endswith("+json")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (finite numbers only)")


def json_refusal(raw: bytes) -> str | None:
    """Why a JSON request body is refused (None: it is fine, or not JSON at all, which
    the route reports in its own words)."""
    if not raw.strip():
        return None
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        return "the JSON body is nested too deeply"
    except ValueError as exc:
        if "JSON allows" in str(exc) or "integer string conversion" in str(exc):
            return f"the JSON body: {exc}"
        return None  # malformed JSON: the framework says where
    problem = json_problem(value, "body")
    return None if problem is None else f"the JSON body: {problem}"


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
