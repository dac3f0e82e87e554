"""The guard in front of ``kairox serve`` and ``kairox mcp serve --http`` (pure ASGI, so
it runs here without the web extra): exact Host names against DNS rebinding, loopback
by parsing an address, the token, CSRF and JSON-only paths, and body limits, chunked
bodies included. The real servers are covered in tests_web/ and test_mcp_server.py."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.web.security import Guard, allowed_hosts, is_loopback

CSRF = {"X-Kairox-CSRF": "1"}
TOKEN = "t0ken-for-the-tests-0123456789"
PATHS = ["/api/memories", "/v1/chat/completions", "/static/app.js", "/", "/mcp"]


async def echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers 200 with the length of the body it received."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    data = str(len(body)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": data})


def client(bind: str = "127.0.0.1", port: int = 8765, **guard: Any) -> httpx.AsyncClient:
    app = Guard(echo, bind_host=bind, port=port, **{"token": None, **guard})
    shown = f"[{bind}]" if ":" in bind else bind
    base = f"http://{shown}:{port}" if bind not in ("0.0.0.0", "::") else f"http://x:{port}"
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


REBINDING = [
    "127.0.0.1.evil.example:8765",
    "127.evil.example:8765",
    "127.0.0.1.nip.io:8765",
    "localhost.evil.example:8765",
    "evil.example:8765",
    "127.0.0.1:8766",  # wrong port
    "localhost:80",
    "127.0.0.1",  # no port, but the server is not on 80
    "[::1]:8766",
    "[::2]:8765",
    "::1:8765",
    "127.0.0.2:8765",  # loopback, but not this server's name
    "127.1:8765",
    "0x7f000001:8765",
    "",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("host", REBINDING)
async def test_without_a_token_a_foreign_host_is_refused_everywhere(host: str, path: str) -> None:
    async with client() as c:
        r = await c.get(path, headers={"Host": host})
        assert r.status_code == 421, (host, path)
        assert "is not served" in r.json()["detail"] and "127.0.0.1:8765" in r.json()["detail"]
        r = await c.post(path, json={}, headers={**CSRF, "Host": host})
        assert r.status_code == 421


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LocalHost:8765"]
)
async def test_the_loopback_names_with_the_port_are_served(host: str, path: str) -> None:
    async with client() as c:
        assert (await c.get(path, headers={"Host": host})).status_code == 200


@pytest.mark.parametrize(
    ("bind", "port", "served"),
    [
        ("::1", 8765, "[::1]:8765"),
        ("127.0.0.2", 9000, "127.0.0.2:9000"),
        ("localhost", 80, "localhost"),
        ("127.0.0.1", 80, "127.0.0.1"),
    ],
)
async def test_the_exact_bind_host_is_served(bind: str, port: int, served: str) -> None:
    async with client(bind, port) as c:
        assert (await c.get("/api/x", headers={"Host": served})).status_code == 200
        evil = served.replace("]", "").replace("[", "") + ".evil.example"
        assert (await c.get("/api/x", headers={"Host": evil})).status_code == 421


def test_allowed_hosts_are_the_loopback_names_and_the_bind_host() -> None:
    assert allowed_hosts("127.0.0.2", 9) == {
        "127.0.0.1:9",
        "localhost:9",
        "[::1]:9",
        "127.0.0.2:9",
    }


async def test_the_port_the_server_listens_on_wins_over_the_configured_one() -> None:
    # `--port 0` binds a free port: the ASGI scope's server says which
    app = Guard(echo, token=None, bind_host="127.0.0.1", port=0)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:4711") as c:
        assert (await c.get("/api/x")).status_code == 200
        assert (await c.get("/api/x", headers={"Host": "127.0.0.1:0"})).status_code == 421


async def test_with_a_token_off_loopback_any_host_may_ask_but_must_carry_it() -> None:
    async with client("0.0.0.0", 8765, token=TOKEN) as c:
        host = {"Host": "kairox.example.org:8765"}
        assert (await c.get("/api/x", headers=host)).status_code == 401
        auth = {**host, "Authorization": f"Bearer {TOKEN}"}
        assert (await c.get("/api/x", headers=auth)).status_code == 200


async def test_with_a_token_on_loopback_the_token_decides() -> None:
    # an SSH tunnel's other port may ask with the token; a rebound page cannot send it
    async with client(token=TOKEN) as c:
        auth = {"Authorization": f"Bearer {TOKEN}", "Host": "127.0.0.1:9000"}
        assert (await c.get("/api/x", headers=auth)).status_code == 200
        rebound = {"Host": "127.0.0.1.nip.io:8765", "Cookie": "other=1"}
        assert (await c.get("/api/x", headers=rebound)).status_code == 401


async def test_origin_must_be_this_servers_exact_origin() -> None:
    async with client() as c:
        for origin in (
            "http://127.0.0.1.evil.example:8765",
            "http://127.0.0.1:8766",
            "https://127.0.0.1:8765",
            "null",
        ):
            r = await c.post("/api/x", json={}, headers={**CSRF, "Origin": origin})
            assert r.status_code == 403, origin
        ok = {**CSRF, "Origin": "http://127.0.0.1:8765"}
        assert (await c.post("/api/x", json={}, headers=ok)).status_code == 200


async def test_json_only_paths_need_json_posts_instead_of_the_csrf_header() -> None:
    async with client(json_only=("/mcp",)) as c:
        assert (await c.post("/mcp", json={})).status_code == 200
        r = await c.post("/mcp", content=b"x", headers={"Content-Type": "text/plain"})
        assert r.status_code == 415
        assert (await c.delete("/mcp")).status_code == 200  # preflighted cross-site
        assert (await c.post("/api/x", json={})).status_code == 403  # not a JSON-only path


async def chunks(n: int, size: int) -> AsyncIterator[bytes]:
    for _ in range(n):
        yield b"x" * size


async def test_a_chunked_body_over_the_limit_is_413_and_one_under_it_arrives_whole() -> None:
    async with client(max_body=4096) as c:
        r = await c.post("/api/x", content=chunks(10, 1000), headers=CSRF)
        assert r.status_code == 413 and "over 4096 bytes" in r.json()["detail"]
        r = await c.post("/api/x", content=chunks(4, 1000), headers=CSRF)
        assert (r.status_code, r.text) == (200, "4000")
        r = await c.post("/api/x", content=b"y" * 5000, headers=CSRF)
        assert r.status_code == 413


@pytest.mark.parametrize(
    "name",
    ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "LOCALHOST", " 127.0.0.1 "],
)
def test_loopback_addresses_and_localhost(name: str) -> None:
    assert is_loopback(name)


@pytest.mark.parametrize(
    "name",
    [
        "127.0.0.1.evil.example",
        "127.evil.example",
        "127.0.0.1.nip.io",
        "localhost.evil.example",
        "127.1",
        "0177.0.0.1",
        "0.0.0.0",
        "::",
        "10.0.0.1",
        "",
    ],
)
def test_names_and_other_addresses_are_not_loopback(name: str) -> None:
    assert not is_loopback(name)


@given(st.text(max_size=40))
def test_loopback_only_for_localhost_or_a_parsed_loopback_address(text: str) -> None:
    if is_loopback(text):
        name = text.strip().lower().removeprefix("[").removesuffix("]")
        assert name == "localhost" or ipaddress.ip_address(name).is_loopback


@given(st.from_regex(r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[a-z0-9.-]{1,20}", fullmatch=True))
def test_a_loopback_prefix_never_makes_a_name_loopback(name: str) -> None:
    assert not is_loopback(name)
