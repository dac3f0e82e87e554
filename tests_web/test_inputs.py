"""Input edges on every web route, in process (the real app and guard over a real
database, through httpx's ASGI transport): NaN, Infinity, integers beyond 64 bits and
lone surrogates in any JSON body are 400 with a message, never 500; ids and keys follow
the same rules as the CLI and the Python API (kairox_core/inputs.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kairox_core import Kairox
from kairox_core.config import parse_config
from kairox_core.web.app import create_app

CSRF = {"X-Kairox-CSRF": "1", "Content-Type": "application/json"}
CONFIG = {
    "retrieval": {"workspace_index": False},
    "profiles": {"default": {"provider": "demo"}},
    "providers": {"demo": {"kind": "scripted", "replies": ["Hello."]}},
}


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    kx = Kairox.open(tmp_path / "k.db", parse_config(CONFIG))
    app = create_app(kx, port=8765)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        yield c, app
    kx.close()


def json_routes(app: Any) -> list[tuple[str, str]]:
    """(method, path) of every route that takes a JSON body, ids filled in."""
    inner = app  # under the guard and the /v1 error shaper: the FastAPI app
    while not hasattr(inner, "openapi"):
        inner = inner.app
    schema = inner.openapi()
    out = []
    for path, methods in schema["paths"].items():
        for method, spec in methods.items():
            if "requestBody" in spec:
                filled = path.replace("{seq}", "1").replace("{session_id}", "s-x")
                for name in ("proposal_id", "memory_id", "chunk_id", "name", "fact_id"):
                    filled = filled.replace("{" + name + "}", "x")
                out.append((method.upper(), filled))
    return [*out, ("POST", "/v1/chat/completions")]  # reads its body itself


BAD_BODIES = {
    "NaN": (b'{"text": NaN, "prompt": "hi", "body": "b"}', "NaN is not a number"),
    "Infinity": (b'{"first_seq": Infinity}', "Infinity is not a number"),
    "-Infinity": (b'{"chunk": -Infinity}', "-Infinity is not a number"),
    "1e999": (b'{"chunk": 1e999}', "inf is not a number"),
    "2**64": (b'{"chunk": 18446744073709551616}', "does not fit in 64 bits"),
    "surrogate": (b'{"text": "a\\ud800b", "prompt": "x"}', "lone surrogate"),
    "surrogate key": (b'{"\\udfff": 1}', "lone surrogate"),
    "nested": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "huge int": (b'{"chunk": 1' + b"0" * 5000 + b"}", "integer string conversion"),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
async def test_every_json_route_refuses_bad_numbers_and_text_with_400(
    web: tuple[httpx.AsyncClient, Any], case: str
) -> None:
    client, app = web
    raw, message = BAD_BODIES[case]
    routes = json_routes(app)
    assert len(routes) >= 19
    for method, path in routes:
        headers = {**CSRF, "X-Kairox-Session": "s-x"}
        r = await client.request(method, path, content=raw, headers=headers)
        assert r.status_code == 400, (method, path, r.status_code, r.text)
        body = r.json()  # /v1 answers in OpenAI's error shape
        said = body["error"]["message"] if path.startswith("/v1/") else body["detail"]
        assert message in said, (path, body)


async def test_integers_beyond_the_stores_are_400(web: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = web
    sid = (await client.post("/api/sessions", json={}, headers=CSRF)).json()["session_id"]
    ok = await client.get(f"/api/sessions/{sid}/events", params={"after": 2**63 - 2})
    assert ok.status_code == 200 and ok.json() == []
    for after in (2**63 - 1, 2**63, 2**70, -1):
        r = await client.get(f"/api/sessions/{sid}/events", params={"after": after})
        assert r.status_code == 400 and "query.after" in r.json()["detail"], r.text
    for k in (10**12, 2**64, -1):
        r = await client.get("/api/longterm/search", params={"q": "x", "session_id": sid, "k": k})
        assert r.status_code == 400 and "query.k" in r.json()["detail"], r.text
    r = await client.put(f"/api/sessions/{sid}/summaries/{2**63}", json={"text": "t"}, headers=CSRF)
    assert r.status_code == 400 and "path.seq" in r.json()["detail"]
    r = await client.post(
        f"/api/sessions/{sid}/compact", json={"first_seq": 2**63 - 1}, headers=CSRF
    )
    assert r.status_code < 500, r.text


async def test_a_validation_error_is_one_readable_line(web: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = web
    r = await client.post("/api/memories", json={"scope": "planet", "body": ""}, headers=CSRF)
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "body.scope" in detail and "body.body" in detail


@pytest.mark.parametrize(
    ("spec", "status", "message"),
    [
        ({"scope": "user", "key": "", "body": "b"}, 400, "key '' is not valid"),
        ({"scope": "user", "key": "my key", "body": "b"}, 400, "key 'my key' is not valid"),
        ({"scope": "user", "key": "<b>k</b>", "body": "b"}, 400, "no spaces or markup"),
        ({"scope": "user", "body": "b"}, 400, "needs a key"),
        ({"scope": "workspace", "key": "k", "body": "b"}, 400, "needs a workspace id"),
        ({"scope": "workspace", "key": "k", "body": "b", "workspace": "a/b"}, 400, "a/b"),
        ({"scope": "session", "body": "b"}, 400, "existing session"),
        ({"scope": "session", "body": "b", "session_id": "ghost"}, 404, "no session 'ghost'"),
        ({"scope": "session", "body": "b", "session_id": "_memory:user"}, 400, "Kairox's own"),
        ({"scope": "user", "key": "k", "body": "b", "session_id": "ghost"}, 404, "ghost"),
    ],
)
async def test_memory_keys_and_ids_follow_the_shared_rules(
    web: tuple[httpx.AsyncClient, Any], spec: dict[str, Any], status: int, message: str
) -> None:
    client, _ = web
    r = await client.post("/api/memories", json=spec, headers=CSRF)
    assert r.status_code == status, r.text
    assert message in r.json()["detail"]
    assert (await client.get("/api/memories")).json() == []


@pytest.mark.parametrize("bad", ["a/b", "_memory:user", "_packs", "", "a b", "<x>", "x" * 200])
async def test_session_and_workspace_ids_follow_the_shared_rules(
    web: tuple[httpx.AsyncClient, Any], bad: str
) -> None:
    client, _ = web
    r = await client.post("/api/sessions", json={"session_id": bad}, headers=CSRF)
    assert r.status_code == 400 and "session id" in r.json()["detail"], r.text
    r = await client.post("/api/sessions", json={"workspace": bad}, headers=CSRF)
    assert r.status_code == 400 and "workspace id" in r.json()["detail"], r.text
    assert (await client.get("/api/sessions")).json() == []


async def test_good_requests_still_work(web: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = web
    r = await client.post(
        "/api/sessions", json={"session_id": "chat-1", "workspace": "w.1"}, headers=CSRF
    )
    assert r.status_code == 200
    r = await client.post(
        "/api/memories",
        json={"scope": "session", "key": "topic", "body": "trains 🚂", "session_id": "chat-1"},
        headers=CSRF,
    )
    assert r.status_code == 200 and r.json()["body"] == "trains 🚂"
    raw = json.dumps({"scope": "user", "key": "deploy.day", "body": "Tuesday 1.5"}).encode()
    assert (await client.post("/api/memories", content=raw, headers=CSRF)).status_code == 200
