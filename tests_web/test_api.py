"""The HTTP API and the OpenAI-compatible endpoint of a real ``kairox serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from kairox_core.testing.files import pdf_with
from kairox_core.testing.serve import Server, start_server, stop_server
from kairox_core.web.security import DEFAULT_MAX_BODY

CSRF = {"X-Kairox-CSRF": "1"}
REPORT = pdf_with(["Revenue rose 12 percent", "Costs fell"])
TOKEN = "t0ken-for-the-tests-0123456789"


def turn(server: Server, sid: str, prompt: str) -> list[tuple[str, Any]]:
    """Run a turn over SSE; the (event, data) pairs in order."""
    events: list[tuple[str, Any]] = []
    with httpx.stream(
        "POST",
        f"{server.url}/api/sessions/{sid}/turns",
        json={"prompt": prompt},
        headers=CSRF,
        timeout=30,
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    return events


def test_turn_streams_cleaned_deltas_trace_and_proposal(serve: Server) -> None:
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    events = turn(serve, sid, "I use helix")
    names = [n for n, _ in events]
    assert names.count("delta") > 1  # streamed in pieces
    text = "".join(d["text"] for n, d in events if n == "delta")
    assert text.rstrip() == "Hello! I will keep that in mind."
    assert "<memory" not in text
    assert names[-1] == "done"
    trace = dict(events)["trace"]
    assert trace["layers"]["prompt"]["tokens"] > 0
    proposal = dict(events)["proposal"]
    assert (proposal["scope"], proposal["key"], proposal["body"]) == (
        "user",
        "editor",
        "prefers helix",
    )
    # reject it, then the queue is empty and nothing was stored
    serve.api("POST", f"/api/approvals/{proposal['id']}/reject", {"reason": "no"})
    assert serve.api("GET", "/api/approvals") == []
    assert serve.api("GET", "/api/memories") == []
    messages = serve.api("GET", f"/api/sessions/{sid}/messages")
    assert [m["type"] for m in messages] == ["UserMessageAdded", "AssistantMessageCompleted"]


def test_memories_search_edit_history_delete(serve: Server) -> None:
    m = serve.api("POST", "/api/memories", {"scope": "user", "key": "editor", "body": "vim"})
    serve.api(
        "POST",
        "/api/memories",
        {"scope": "workspace", "key": "ci", "body": "nox", "workspace": "w"},
    )
    assert [r["key"] for r in serve.api("GET", "/api/memories?q=NOX")] == ["ci"]
    serve.api("PUT", f"/api/memories/{m['id']}", {"body": "helix"})
    history = serve.api("GET", f"/api/memories/{m['id']}/history")
    assert [v["body"] for v in history] == ["vim", "helix"]
    serve.api("DELETE", f"/api/memories/{m['id']}")
    r = httpx.get(f"{serve.url}/api/memories/{m['id']}")
    assert r.status_code == 404 and "no memory" in r.json()["detail"]


def test_compaction_range_summaries_edit_drop_pin_and_usage(serve: Server) -> None:
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    for prompt in ("one", "two", "three"):
        turn(serve, sid, prompt)
    result = serve.api("POST", f"/api/sessions/{sid}/compact", {"first_seq": 1, "last_seq": 4})
    assert result["status"] == "completed"
    (summary,) = serve.api("GET", f"/api/sessions/{sid}/summaries")
    assert summary["first_seq"] <= 2 and summary["originals"][0]["payload"]["text"] == "one"
    seq = summary["seq"]
    serve.api("PUT", f"/api/sessions/{sid}/summaries/{seq}", {"text": "line a\nline b"})
    serve.api("POST", f"/api/sessions/{sid}/summaries/{seq}/drop", {"chunk": 0})
    (summary,) = serve.api("GET", f"/api/sessions/{sid}/summaries")
    assert summary["chunks"] == ["line b"]
    pin = serve.api("POST", f"/api/sessions/{sid}/pins", {"text": "deadline is Friday"})
    context = serve.api("GET", f"/api/sessions/{sid}/context")
    assert [p["text"] for p in context["pinned"]] == ["deadline is Friday"]
    assert any("deadline is Friday" in str(m["content"]) for m in context["messages"])
    serve.api("DELETE", f"/api/sessions/{sid}/pins/{pin['payload']['fact_id']}")
    (usage,) = serve.api("GET", f"/api/usage?session_id={sid}")
    assert usage["turns"] == 3 and usage["compactions"] == 1
    assert usage["chat_prompt_tokens"] > 0 and usage["total_tokens"] > 0
    r = httpx.post(f"{serve.url}/api/sessions/nope/compact", json={}, headers=CSRF)
    assert r.status_code == 404


def test_longterm_and_packs(serve: Server) -> None:
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    chunk = serve.api(
        "POST",
        "/api/longterm",
        {"text": "the build uses nox", "scope": "project", "workspace": "default"},
    )
    serve.api("PUT", f"/api/longterm/{chunk['id']}", {"text": "the build uses nox sessions"})
    hits = serve.api(
        "GET", f"/api/longterm/search?q=nox+sessions+build&session_id={sid}&workspace=default"
    )
    assert hits and hits[0]["id"] == chunk["id"]
    pack = serve.api("POST", "/api/packs/promote", {"chunk_ids": [chunk["id"]]})
    assert pack["draft"] and "nox sessions" in pack["text"]
    serve.api("POST", "/api/packs", {"name": "style", "text": "short answers"})
    assert {p["name"] for p in serve.api("GET", "/api/packs")} >= {"style", pack["name"]}
    serve.api("DELETE", f"/api/longterm/{chunk['id']}")
    assert serve.api("GET", "/api/longterm") == []


def test_openapi_schema_is_served(serve: Server) -> None:
    schema = httpx.get(f"{serve.url}/openapi.json").json()
    assert "/api/sessions/{session_id}/turns" in schema["paths"]
    assert "/v1/chat/completions" in schema["paths"]


def test_openai_endpoint_not_streaming(serve: Server) -> None:
    body = {"model": "default", "messages": [{"role": "user", "content": "I use helix"}]}
    r = httpx.post(
        f"{serve.url}/v1/chat/completions",
        json=body,
        headers={"X-Kairox-Session": "chat-1"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["message"]["content"].rstrip() == "Hello! I will keep that in mind."
    assert data["kairox"]["session_id"] == "chat-1"
    assert [p["key"] for p in data["kairox"]["proposals"]] == ["editor"]
    assert data["usage"]["prompt_tokens"] > 0
    # the proposal waits for a person; the same session continues through `user`
    assert [p["id"] for p in serve.api("GET", "/api/approvals")] == [
        data["kairox"]["proposals"][0]["id"]
    ]
    body = {"messages": [{"role": "user", "content": "and now?"}], "user": "chat-1"}
    r = httpx.post(f"{serve.url}/v1/chat/completions", json=body, timeout=30)
    assert r.json()["choices"][0]["message"]["content"] == "Noted, answering from memory."
    messages = serve.api("GET", "/api/sessions/chat-1/messages")
    assert [m["payload"]["text"] for m in messages if m["type"] == "UserMessageAdded"] == [
        "I use helix",
        "and now?",
    ]


def test_openai_endpoint_streaming(serve: Server) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True, "user": "chat-2"}
    chunks: list[Any] = []
    with httpx.stream("POST", f"{serve.url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                chunks.append(line[6:])
    assert chunks[-1] == "[DONE]"
    parsed = [json.loads(c) for c in chunks[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in parsed)
    assert text.rstrip() == "Hello! I will keep that in mind."
    assert parsed[-1]["choices"][0]["finish_reason"] == "stop"
    assert parsed[-1]["kairox"]["proposals"][0]["body"] == "prefers helix"


def test_openai_endpoint_derives_a_session_from_the_conversation(serve: Server) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{serve.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    sid = r.json()["kairox"]["session_id"]
    body["messages"] += [
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "again"},
    ]
    r = httpx.post(f"{serve.url}/v1/chat/completions", json=body, timeout=30)
    assert r.json()["kairox"]["session_id"] == sid
    r = httpx.post(f"{serve.url}/v1/chat/completions", json={"model": "nope", **body})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_csrf_origin_host_and_body_limits(serve: Server) -> None:
    url = f"{serve.url}/api/sessions"
    assert httpx.post(url, json={}).status_code == 403  # no CSRF header
    r = httpx.post(url, json={}, headers={**CSRF, "Origin": "http://evil.example"})
    assert r.status_code == 403
    assert httpx.post(url, json={}, headers={**CSRF, "Origin": serve.url}).status_code == 200
    # a cross-site form post to the OpenAI endpoint: not JSON, refused
    r = httpx.post(
        f"{serve.url}/v1/chat/completions", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 415
    assert httpx.get(url, headers={"Host": "attacker.example:80"}).status_code == 421
    r = httpx.post(
        url,
        content=b"{" + b" " * DEFAULT_MAX_BODY + b"}",
        headers={**CSRF, "Content-Type": "application/json"},
    )
    assert r.status_code == 413


def test_dns_rebinding_names_are_refused_on_every_route(serve: Server) -> None:
    """The probes' Host headers, against the real server: no memory read or written, no
    completion, no static file; the loopback names with the port are served."""
    port = serve.url.rsplit(":", 1)[1]
    serve.api("POST", "/api/memories", {"scope": "user", "key": "k", "body": "secret"})
    for name in ("127.0.0.1.evil.example", "127.evil.example", "127.0.0.1.nip.io"):
        host = {"Host": f"{name}:{port}"}
        assert httpx.get(f"{serve.url}/api/memories", headers=host).status_code == 421
        r = httpx.post(
            f"{serve.url}/api/memories",
            json={"scope": "user", "key": "evil", "body": "x"},
            headers={**host, **CSRF, "Origin": f"http://{name}:{port}"},
        )
        assert r.status_code == 421
        r = httpx.post(
            f"{serve.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={**host, "X-Kairox-Session": "s"},
        )
        assert r.status_code == 421
        assert httpx.get(f"{serve.url}/static/app.js", headers=host).status_code == 421
        assert httpx.get(f"{serve.url}/", headers=host).status_code == 421
    wrong_port = {"Host": f"127.0.0.1:{int(port) + 1}"}
    assert httpx.get(f"{serve.url}/api/memories", headers=wrong_port).status_code == 421
    assert [m["key"] for m in serve.api("GET", "/api/memories")] == ["k"]
    for name in ("127.0.0.1", "localhost", "[::1]"):
        r = httpx.get(f"{serve.url}/static/app.js", headers={"Host": f"{name}:{port}"})
        assert r.status_code == 200, name


def test_a_chunked_body_over_max_body_is_413(serve: Server) -> None:
    def body() -> Any:
        for _ in range(DEFAULT_MAX_BODY // 65536 + 2):
            yield b" " * 65536

    r = httpx.post(
        f"{serve.url}/api/sessions",
        content=body(),
        headers={**CSRF, "Content-Type": "application/json"},
    )
    assert r.status_code == 413 and "request body over" in r.json()["detail"]


def test_bad_pack_files_are_reported_and_skipped(serve: Server) -> None:
    import os

    packs = serve.config.parent / "packs"
    packs.mkdir()
    (packs / "good.md").write_text('+++\nname = "good"\nlevel = "team"\n+++\nBe kind.\n')
    (packs / "bad.md").write_text("+++\nlevel = [\n+++\n")
    os.mkfifo(packs / "x.md")
    assert [p["name"] for p in serve.api("GET", "/api/packs")] == ["good"]
    problems = {Path(p["path"]).name: p["problem"] for p in serve.api("GET", "/api/packs/problems")}
    assert set(problems) == {"bad.md", "x.md"} and "FIFO" in problems["x.md"]
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    assert turn(serve, sid, "hello")[-1][0] == "done"


@pytest.fixture
def token_server(tmp_path: Path) -> Any:
    server = start_server(tmp_path, ["ok"], "--token", TOKEN)
    yield server
    stop_server(server)


def test_token_is_checked_on_every_request(token_server: Server) -> None:
    url = token_server.url
    assert httpx.get(f"{url}/api/sessions").status_code == 401
    assert httpx.get(f"{url}/").status_code == 401
    assert httpx.get(f"{url}/static/app.js").status_code == 401
    assert (
        httpx.get(f"{url}/api/sessions", headers={"Authorization": "Bearer wrong"}).status_code
        == 401
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{url}/api/sessions", headers=auth).status_code == 200
    # the browser's way in: /?token=... sets an HttpOnly cookie, then the app works
    with httpx.Client(base_url=url) as browser:
        r = browser.get(f"/?token={TOKEN}")
        assert r.status_code == 303 and "HttpOnly" in r.headers["set-cookie"]
        assert browser.get("/api/sessions").status_code == 200
        assert browser.post("/api/sessions", json={}, headers=CSRF).status_code == 200


def test_bad_tokens_are_refused_at_start(tmp_path: Path) -> None:
    import os
    import subprocess

    from kairox_core.testing.serve import kairox_cmd, write_config

    config = write_config(tmp_path / "kairox.toml", ["x"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROX_")}
    for token in ("short", "$env:KAIROX_TEST_UNSET_TOKEN"):
        r = subprocess.run(
            kairox_cmd(config, tmp_path / "k.db", "serve", "--token", token),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert r.returncode == 2 and "kairox: error: --token" in r.stderr, r.stderr


def test_summary_lines_keep_their_numbers_for_drop_pin_and_long_term(serve: Server) -> None:
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    for prompt in ("one", "two", "three"):
        turn(serve, sid, prompt)
    seq = serve.api("POST", f"/api/sessions/{sid}/compact", {})["summary_seq"]
    base = f"/api/sessions/{sid}/summaries/{seq}"
    serve.api("PUT", base, {"text": "LINE-A\nLINE-B\nLINE-C\nLINE-D"})
    serve.api("POST", f"{base}/drop", {"chunk": 1})
    (summary,) = serve.api("GET", f"/api/sessions/{sid}/summaries")
    assert summary["lines"] == [
        {"index": 0, "text": "LINE-A"},
        {"index": 2, "text": "LINE-C"},
        {"index": 3, "text": "LINE-D"},
    ]
    assert "LINE-D" in serve.api("POST", f"{base}/drop", {"chunk": 3})["payload"]["text"]
    serve.api("POST", f"{base}/drop", {"chunk": 0})  # the first line: the others keep theirs
    (summary,) = serve.api("GET", f"/api/sessions/{sid}/summaries")
    assert summary["lines"] == [{"index": 2, "text": "LINE-C"}]
    pinned = serve.api("POST", f"{base}/pin", {"line": 2})["payload"]
    assert (pinned["text"], pinned["source_seq"]) == ("LINE-C", seq)
    chunk = serve.api("POST", f"{base}/longterm", {"line": 2})
    assert (chunk["text"], chunk["scope"], chunk["session_id"]) == ("LINE-C", "session", sid)
    r = httpx.post(f"{serve.url}{base}/longterm", json={"line": 1}, headers=CSRF)
    assert r.status_code == 400 and "its lines are: 2" in r.json()["detail"]


def test_remember_this_names_the_message_or_finds_it(serve: Server) -> None:
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    turn(serve, sid, "we ship on Fridays")
    said = {m["type"]: m["seq"] for m in serve.api("GET", f"/api/sessions/{sid}/messages")}
    found = serve.api("POST", f"/api/sessions/{sid}/remember", {"text": "ship on  Fridays"})
    assert (found["scope"], found["source_seq"]) == ("session", said["UserMessageAdded"])
    named = serve.api(
        "POST",
        f"/api/sessions/{sid}/remember",
        {"text": "x", "scope": "global", "source_seq": said["AssistantMessageCompleted"]},
    )
    assert (named["scope"], named["source_seq"]) == ("global", said["AssistantMessageCompleted"])
    r = httpx.post(
        f"{serve.url}/api/sessions/{sid}/remember",
        json={"text": "x", "source_seq": 1},
        headers=CSRF,
    )
    assert r.status_code == 400 and "is not a message" in r.json()["detail"]


def test_a_turn_with_uploads_and_the_originals_as_downloads(serve: Server) -> None:
    import base64

    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(25)
    uploads = [
        {"filename": "login.png", "data": base64.b64encode(png).decode()},
        {"filename": "notes.txt", "data": base64.b64encode(b"ship on Fridays").decode()},
        {"filename": "report.pdf", "data": base64.b64encode(REPORT).decode()},
    ]
    url = f"{serve.url}/api/sessions/{sid}/turns"
    with httpx.stream(
        "POST", url, json={"prompt": "look", "attachments": uploads}, headers=CSRF
    ) as r:
        assert r.status_code == 200
        r.read()
    (asked,) = [
        m
        for m in serve.api("GET", f"/api/sessions/{sid}/messages")
        if m["type"] == "UserMessageAdded"
    ]
    kinds = [a["kind"] for a in asked["payload"]["attachments"]]
    assert kinds == ["image", "document", "document"]
    base = f"{serve.url}/api/sessions/{sid}/messages/{asked['seq']}/attachments"
    image = httpx.get(f"{base}/0")
    assert image.content == png and image.headers["content-type"] == "image/png"
    assert "login.png" in image.headers["content-disposition"]
    text = httpx.get(f"{base}/1")
    assert text.text == "ship on Fridays" and text.headers["content-type"].startswith("text/plain")
    pdf = httpx.get(f"{base}/2")  # the original file, not only its text
    assert pdf.content == REPORT and pdf.headers["content-type"] == "application/pdf"
    assert httpx.get(f"{base}/3").status_code == 400
    bad = httpx.post(
        url, json={"prompt": "x", "attachments": [{"filename": "a", "data": "%%%"}]}, headers=CSRF
    )
    assert bad.status_code == 400 and "not base64" in bad.json()["detail"]
    assert len(serve.api("GET", f"/api/sessions/{sid}/messages")) == 2  # no turn was run


def test_bad_uploads_are_clear_400s_and_run_no_turn(serve: Server) -> None:
    import base64

    from kairox_core.attachments import MAX_BYTES
    from kairox_core.testing.files import BROKEN_PDF, ZIP, encrypted_pdf

    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    url = f"{serve.url}/api/sessions/{sid}/turns"
    for name, data, said in [
        ("locked.pdf", encrypted_pdf(), "locked.pdf: the PDF is encrypted"),
        ("broken.pdf", BROKEN_PDF, "broken.pdf: the PDF cannot be read"),
        ("archive.zip", ZIP, "archive.zip: not a type Kairox reads"),
        ("big.txt", b"x" * (MAX_BYTES + 1), "is over the limit of"),
    ]:
        upload = {"filename": name, "data": base64.b64encode(data).decode()}
        r = httpx.post(
            url, json={"prompt": "read", "attachments": [upload]}, headers=CSRF, timeout=120
        )
        assert r.status_code == 400 and said in r.json()["detail"], (name, r.text)
    assert serve.api("GET", f"/api/sessions/{sid}/messages") == []
