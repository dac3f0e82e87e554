"""Slow clients are cut off: a real ``kairox serve`` (small deadlines injected with
``--header-timeout``/``--body-timeout``) closes a connection that sends its headers or
its body too slowly, and still answers a client that is quick."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from kairox_core.testing.serve import REPLIES, start_server, stop_server

pytestmark = pytest.mark.slow

HANG_GUARD = 120.0  # a broken build fails here instead of hanging the suite


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a condition: recv
    returns b"" when it does; the socket timeout is only a hang guard)."""
    sock.settimeout(HANG_GUARD)
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.mark.parametrize(
    "sent",
    [
        pytest.param(b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1", id="headers"),
        pytest.param(
            b"POST /api/memories HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b'X-Kairox-CSRF: 1\r\nContent-Length: 200\r\n\r\n{"body": "a slow',
            id="body",
        ),
    ],
)
def test_a_slow_client_is_cut_off_and_a_quick_one_is_served(tmp_path: Path, sent: bytes) -> None:
    server = start_server(
        tmp_path, list(REPLIES), "--header-timeout", "0.5", "--body-timeout", "0.5"
    )
    try:
        host, port = server.url.removeprefix("http://").split(":")
        sent = sent.replace(b"{host}", f"{host}:{port}".encode())
        with socket.create_connection((host, int(port)), timeout=HANG_GUARD) as slow:
            slow.sendall(sent)  # and never the rest
            answered = closed_by_server(slow)
        assert b"201" not in answered and b"200 OK" not in answered, answered
        # the server is fine for a client that sends its request at once
        quick = httpx.get(server.url + "/api/sessions", timeout=HANG_GUARD)
        assert quick.status_code == 200, quick.text
        assert server.process.poll() is None
    finally:
        stop_server(server)
