"""PostgreSQL stopped and started under running Kairox processes: ``serve`` answers 503
with a JSON message during the outage and serves again after it, ``chat --plain`` says
the turn failed and answers the next one, the CLI prints one line (issue 27, item 2)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import WAIT, Lines, kairox, said_clearly

from kairox_core.testing.serve import start_server, stop_server

pg = pytest.importorskip("kairox_postgres.testing")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = pg.PgTestServer()
    yield srv
    srv.start()
    srv.close()


def _api(base: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, base + path, json=body, headers={"X-Kairox-CSRF": "1"}, timeout=WAIT
    )


def test_serve_answers_503_during_an_outage_and_recovers(tmp_path: Path, server: Any) -> None:
    url = server.fresh_database()
    web = start_server(tmp_path, ["first answer", "second answer"], db=url)  # type: ignore[arg-type]
    try:
        session = _api(web.url, "POST", "/api/sessions", {}).json()["session_id"]
        turn = _api(web.url, "POST", f"/api/sessions/{session}/turns", {"prompt": "hello"})
        assert turn.status_code == 200 and "event: done" in turn.text
        server.stop()
        try:
            for method, path, body in (
                ("GET", "/api/sessions", None),
                ("POST", f"/api/sessions/{session}/turns", {"prompt": "during"}),
                ("POST", "/api/memories", {"scope": "user", "key": "k", "body": "v"}),
            ):
                answer = _api(web.url, method, path, body)
                assert answer.status_code == 503, (path, answer.text)
                assert "cannot be reached" in answer.json()["detail"]
        finally:
            server.start()
        again = _api(web.url, "POST", f"/api/sessions/{session}/turns", {"prompt": "after"})
        assert again.status_code == 200 and "event: done" in again.text
        events = _api(web.url, "GET", f"/api/sessions/{session}/events").json()
        texts = [e.get("data", e).get("text") for e in events if isinstance(e, dict)]
        assert "during" not in texts  # the failed turn recorded nothing
    finally:
        stop_server(web)
    log = web.process.stdout.read().decode() if web.process.stdout else ""
    assert "Traceback" not in log, log


def test_chat_says_the_turn_failed_and_answers_the_next_after_the_restart(
    tmp_path: Path, server: Any, config: Path, chat_process: Callable[[str], Any]
) -> None:
    url = server.fresh_database()
    chat = chat_process(url)
    out, err = Lines(chat.stdout), Lines(chat.stderr)
    chat.stdin.write("one\n")
    chat.stdin.flush()
    out.wait_for("first answer")
    server.stop()
    try:
        chat.stdin.write("two\n")
        chat.stdin.flush()
        line = err.wait_for("error:")
        assert "cannot be reached" in line
    finally:
        server.start()
    chat.stdin.write("three\n")
    chat.stdin.flush()
    out.wait_for("second answer")  # the failed turn never reached the model
    chat.stdin.close()
    assert chat.wait(timeout=WAIT) == 1  # a turn failed: said in the exit code too
    assert not any("Traceback" in line for line in err.seen)


def test_cli_during_an_outage_prints_one_line(tmp_path: Path, server: Any, config: Path) -> None:
    url = server.fresh_database()
    assert kairox(config, url, "sessions").returncode == 0  # creates the schema
    server.stop()
    try:
        for args in (("sessions",), ("memory", "list"), ("db", "check")):
            line = said_clearly(kairox(config, url, *args))
            assert "cannot be reached" in line and "start the server" in line
    finally:
        server.start()
    assert kairox(config, url, "db", "check").returncode == 0
