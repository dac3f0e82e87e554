"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and demos.

It speaks the wire format real servers use (JSON bodies, SSE streams with chunked
transfer encoding, a usage chunk with empty ``choices`` before ``data: [DONE]``, error
objects ``{"error": {"message", "type", "code"}}``), so the ``openai`` provider and
anything built on it (chat, compaction) can be tested end to end without a network.
Faults are scripted per request with ``server.script(...)``.

    with FakeOpenAIServer(reply="Hi there") as server:
        config = ProviderConfig(id="t", kind="openai", model="fake", base_url=server.base_url)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kairox_core.testing.http_server import QuietHTTPServer

Reply = str | Callable[[list[dict[str, Any]]], str]


@dataclass
class Action:
    """What the server does for one request (consumed in order; then default behaviour).

    ``status``: answer with this HTTP error and an OpenAI-style error body.
    ``stream_fault``: "malformed" (a non-JSON event), "no_done" (the body ends cleanly
    without [DONE] or a finish reason), "cut" (the connection drops mid-stream),
    "error_event" (an error object inside the stream), "fragmented" (a correct stream
    whose events are split across many 5-byte HTTP chunks).
    ``delay``: seconds to wait before answering. ``reply``: the text for this request.
    ``tool_calls``: ``(name, arguments JSON)`` pairs the model "calls" instead of replying
    (streamed as OpenAI does: id and name first, then the arguments in small pieces).
    """

    status: int | None = None
    message: str | None = None
    retry_after: str | None = None
    stream_fault: str | None = None
    delay: float = 0.0
    reply: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def words(text: str) -> list[str]:
    """The pieces a reply streams in: each word with its trailing space."""
    pieces: list[str] = []
    for part in text.split(" "):
        if pieces:
            pieces[-1] += " "
        pieces.append(part)
    return [p for p in pieces if p]


def count_prompt(messages: Sequence[Mapping[str, Any]]) -> int:
    """The server's deterministic 'token' count: whitespace words plus 3 per message."""
    return sum(3 + len(str(m.get("content") or "").split()) for m in messages)


@dataclass
class FakeOpenAIServer:
    reply: Reply = "Hello from the fake server."
    models: tuple[str, ...] = ("fake-model",)
    api_key: str | None = None
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._actions: deque[Action] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- control -------------------------------------------------------------------

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._actions.extend(actions)

    def _next_action(self) -> Action:
        with self._lock:
            return self._actions.popleft() if self._actions else Action()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = QuietHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reply_for(self, messages: list[dict[str, Any]], action: Action) -> str:
        if action.reply is not None:
            return action.reply
        return self.reply(messages) if callable(self.reply) else self.reply


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeOpenAIServer
    _fragment = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    # --- plumbing ------------------------------------------------------------------

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(
        self,
        status: int,
        message: str,
        etype: str,
        code: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._json(
            status,
            {"error": {"message": message, "type": etype, "param": None, "code": code}},
            headers,
        )

    def _chunk(self, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, payload: Any) -> None:
        text = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"
        if self._fragment:
            # split every event across several HTTP chunks, UTF-8 sequences included
            data = text.encode()
            for i in range(0, len(data), self._fragment):
                self._chunk(data[i : i + self._fragment])
        else:
            self._chunk(text)

    # --- the API -------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "owned_by": "kairox"} for m in self.fake.models
                    ],
                },
            )
        else:
            self._error(404, f"no route {self.path}", "invalid_request_error", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._error(400, "body is not JSON", "invalid_request_error", None)
            return
        self.fake.requests.append(Recorded(self.path, dict(self.headers.items()), body))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(404, {"detail": "Not Found"})  # what FastAPI servers say
            return
        action = self.fake._next_action()
        if action.delay:
            time.sleep(action.delay)
        if self.fake.api_key is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {self.fake.api_key}":
                self._error(
                    401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
                )
                return
        if action.status is not None:
            headers = {"Retry-After": action.retry_after} if action.retry_after else None
            self._error(
                action.status,
                action.message or f"scripted failure {action.status}",
                "server_error" if action.status >= 500 else "requests",
                None,
                headers,
            )
            return
        model = body.get("model")
        if model not in self.fake.models:
            self._error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            )
            return
        messages = body.get("messages") or []
        text = self.fake.reply_for(messages, action)
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        pieces = words(text)
        finish = "stop"
        if limit is not None and len(pieces) > int(limit):
            pieces, finish = pieces[: int(limit)], "length"
        usage = {
            "prompt_tokens": count_prompt(messages),
            "completion_tokens": len(pieces),
            "total_tokens": count_prompt(messages) + len(pieces),
        }
        if action.tool_calls:
            self._tool_calls(model, action.tool_calls, usage, body)
        elif body.get("stream"):
            self._stream(model, pieces, finish, usage, body, action)
        else:
            self._json(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(pieces)},
                            "finish_reason": finish,
                        }
                    ],
                    "usage": usage,
                },
            )

    def _tool_calls(
        self,
        model: str,
        calls: tuple[tuple[str, str], ...],
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> None:
        whole: list[dict[str, Any]] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
        base: dict[str, Any] = {"id": "chatcmpl-fake", "created": 0, "model": model}
        if not body.get("stream"):
            message = {"role": "assistant", "content": None, "tool_calls": whole}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._json(200, {**base, "object": "chat.completion", "choices": [choice]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._fragment = 0
        base["object"] = "chat.completion.chunk"

        def delta(d: dict[str, Any], reason: str | None = None) -> None:
            self._event({**base, "choices": [{"index": 0, "delta": d, "finish_reason": reason}]})

        delta({"role": "assistant", "content": None})
        for i, (name, args) in enumerate(calls):
            head = {"index": i, "id": f"call_{i}", "type": "function"}
            delta({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
            for start in range(0, len(args), 4):
                piece = {"index": i, "function": {"arguments": args[start : start + 4]}}
                delta({"tool_calls": [piece]})
        delta({}, "tool_calls")
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event({**base, "choices": [], "usage": usage})
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(
        self,
        model: str,
        pieces: list[str],
        finish: str,
        usage: dict[str, int],
        body: dict[str, Any],
        action: Action,
    ) -> None:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._fragment = 5 if action.stream_fault == "fragmented" else 0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }

        def chunk(delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
            out = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
            if include_usage:
                out["usage"] = None
            return out

        self._event(chunk({"role": "assistant", "content": ""}, None))
        for i, piece in enumerate(pieces):
            if action.stream_fault == "cut" and i == 1:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)  # drop without the final chunk
                return
            if action.stream_fault == "malformed" and i == 1:
                self._event("{not json")
            if action.stream_fault == "error_event" and i == 1:
                self._event({"error": {"message": "the model crashed", "type": "server_error"}})
            self._event(chunk({"content": piece}, None))
        if action.stream_fault == "no_done":
            self._chunk("")  # zero-length chunk: a clean end of the body
            return
        self._event(chunk({}, finish))
        if include_usage:
            self._event({**base, "choices": [], "usage": usage})
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def serve(**kwargs: Any) -> Iterator[FakeOpenAIServer]:
    """Generator for a pytest fixture: ``yield from serve()``."""
    server = FakeOpenAIServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()
