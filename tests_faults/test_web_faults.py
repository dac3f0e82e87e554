"""The web API on a full or damaged SQLite database: 507 / 503 with the message, and a
turn that could not be recorded is never a 200 (issue 27, item 3). In-process (the ASGI
app over httpx), in this session because it needs the [web] extra."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.testing.faults import corrupt_pages, fill, unfill


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "healthy.db"
    with Kairox.open(path, KairoxConfig()) as kx:
        for n in range(3):
            session = kx.session()
            for i in range(8):
                session.run_turn_sync(f"question {n}.{i} " + "lorem ipsum " * 40, "an answer")
        kx.storage.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[attr-defined]
    return path


def _full(kx: Kairox) -> None:
    fill(kx.storage.db.conn)  # type: ignore[attr-defined]


def _unfull(kx: Kairox) -> None:
    unfill(kx.storage.db.conn)  # type: ignore[attr-defined]


def _event_count(kx: Kairox, session_id: str) -> int:
    return len(list(kx.events_store.read(session_id)))


def _client(kx: Kairox) -> httpx.AsyncClient:
    from kairox_core.web.app import create_app

    app = create_app(kx, port=8765)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8765",
        headers={"X-Kairox-CSRF": "1"},
    )


async def test_web_answers_507_on_a_full_disk_and_records_nothing(
    kairox_home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "kairox.toml"
    from kairox_core.testing.serve import write_config

    write_config(config, ["an answer " * 500])
    with Kairox.open(tmp_path / "kx.db", config) as kx:
        session = kx.session()
        async with _client(kx) as client:
            _full(kx)
            for n in range(500):  # until a page is needed (the last pages have room left)
                memory = await client.post(
                    "/api/memories",
                    json={"scope": "user", "key": f"k{n}", "body": f"{n} " + "x" * 1900},
                )
                if memory.status_code != 200:
                    break
            assert memory.status_code == 507, memory.text
            assert "disk is full" in memory.json()["detail"]
            before = _event_count(kx, session.id)
            turn = await client.post(
                f"/api/sessions/{session.id}/turns", json={"prompt": "y " * 20000}
            )
            assert turn.status_code == 507, turn.text
            assert "free space" in turn.json()["detail"]
            assert _event_count(kx, session.id) == before
            _unfull(kx)
            ok = await client.post(f"/api/sessions/{session.id}/turns", json={"prompt": "hi"})
            assert ok.status_code == 200 and "event: done" in ok.text


async def test_web_answers_503_with_the_message_for_a_damaged_database(
    kairox_home: Path, healthy: Path, tmp_path: Path
) -> None:
    path = tmp_path / "kx.db"
    path.write_bytes(healthy.read_bytes())
    with Kairox.open(path, KairoxConfig()) as kx:
        corrupt_pages(path)  # damaged under a running server
        kx.storage.db.conn.execute("PRAGMA cache_size = 0")  # type: ignore[attr-defined]
        async with _client(kx) as client:
            answer = await client.get("/api/sessions")
            if answer.status_code == 200:  # the session list was cached: read a session
                sid = answer.json()[0]["session_id"]
                answer = await client.get(f"/api/sessions/{sid}/events")
            assert answer.status_code == 503, answer.text
            assert str(path) in answer.json()["detail"]
            assert "Traceback" not in answer.text
