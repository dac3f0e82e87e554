"""`kairox --db postgresql://...`, `[kairox] database`, `kairox db migrate` and `db copy`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from kairox_core.cli import main
from kairox_core.config import KairoxConfig
from kairox_core.facade import Kairox
from kairox_postgres.copy import CopyError, copy_database
from kairox_postgres.db import PostgresConfigError, redact_url, resolve_url
from kairox_postgres.testing import PgTestServer

CONFIG = """
[kairox]
database = "{database}"

[retrieval]
workspace_index = false

[recall]
enabled = false
"""


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def kairox(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``kairox(*args)`` through the CLI's own entry point, in this process."""

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return invoke


def _with_password(url: str, password: str) -> str:
    """The test server trusts local connections: any password in the URL is accepted."""
    parts = urlsplit(url)
    user = parts.netloc.split(":", 1)[0].split("@", 1)[0]
    return urlunsplit((parts.scheme, f"{user}:{password}@", parts.path, parts.query, ""))


def test_env_password_is_resolved_at_connect_and_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "postgresql://kx:$env:KX_PG_SECRET@db.example/kairox"
    with pytest.raises(PostgresConfigError, match="KX_PG_SECRET"):
        resolve_url(url)
    monkeypatch.setenv("KX_PG_SECRET", "s3cr/t")
    assert resolve_url(url) == "postgresql://kx:s3cr%2Ft@db.example/kairox"
    assert redact_url("postgresql://kx:hunter2@db/kairox") == "postgresql://kx:***@db/kairox"
    assert redact_url(url) == url  # a $env: reference is no secret
    with pytest.raises(PostgresConfigError, match="not a postgresql"):
        resolve_url("mysql://x@y/z")


def test_config_database_url_with_env_password(
    kairox_home: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, kairox: Callable[..., Result]
) -> None:
    monkeypatch.setenv("KX_PG_PASSWORD", "not-needed-by-trust-auth")
    database = _with_password(pg_url, "$env:KX_PG_PASSWORD")
    (kairox_home.parent / "kairox.toml").write_text(CONFIG.format(database=database))
    migrated = kairox("db", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "events: 0 -> 1" in migrated.stdout
    again = kairox("db", "migrate")
    assert "events: 1 (up to date)" in again.stdout
    with Kairox.open(config=str(kairox_home.parent / "kairox.toml")) as kx:
        assert kx.storage.name == "postgresql"
        assert "not-needed" not in kx.storage.location
        session = kx.session(workspace="w")
        session.run_turn_sync("hello", "hi")
    listed = kairox("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert session.id in listed.stdout


def test_db_flag_takes_a_url(kairox_home: Path, pg_url: str, kairox: Callable[..., Result]) -> None:
    (kairox_home.parent / "kairox.toml").write_text(CONFIG.format(database="unused.db"))
    remembered = kairox("--db", pg_url, "memory", "add", "helix", "--key", "editor")
    assert remembered.returncode == 0, remembered.stderr
    shown = kairox("--db", pg_url, "memory", "list")
    assert shown.returncode == 0, shown.stderr
    assert "helix" in shown.stdout
    assert not (kairox_home.parent / "unused.db").exists()
    bad = kairox("db", "migrate", "notaurl.db")
    assert bad.returncode == 2 and "not a postgresql://" in bad.stderr


def _fill(kx: Kairox) -> list[str]:
    """Sessions with turns, an accepted memory edited twice, a rejected proposal."""
    ids = []
    for w in ("alpha", "beta"):
        session = kx.session(workspace=w)
        ids.append(session.id)
        for i in range(6):
            session.run_turn_sync(f"{w} question {i} ✓", f"{w} answer {i}")
    result = kx.session(workspace="alpha", session_id=ids[0]).run_turn_sync(
        "remember", 'ok <memory scope="user" key="diet">vegetarian</memory>'
    )
    record = kx.approvals.accept(result.proposals[0].id)
    kx.memories.update_body(record.id, "vegan")
    kx.memories.update_body(record.id, "vegan, no honey")
    second = kx.session(workspace="beta", session_id=ids[1]).run_turn_sync(
        "x", 'ok <memory scope="workspace" key="db">sqlite</memory>'
    )
    kx.approvals.reject(second.proposals[0].id, reason="wrong")
    kx.memories.put("session", None, "a note", session_id=ids[0], workspace_id="alpha")
    return ids


def _snapshot(kx: Kairox, ids: list[str]) -> dict[str, object]:
    return {
        "events": {
            s.session_id: [(e.seq, e.type, e.to_dict()) for e in kx.events(s.session_id)]
            for s in kx.events_store.sessions()
        },
        "sessions": [s.as_dict() for s in kx.events_store.sessions()],
        "memories": [m.as_dict() for m in kx.memories.list()],
        "history": [v.body for v in kx.memories.history("user", "diet")],
        "proposals": [(p.id, p.status, p.reason) for p in kx.storage.proposals.list()],
        "longterm": [c.as_dict() for c in kx.longterm.list()],
        "recall": [
            (h.chunk.id, round(h.similarity, 5))
            for h in kx.longterm.search(
                "when is the launch?", session_id=ids[0], workspace_id="alpha", threshold=-1
            )
        ],
        "packs": [p.as_dict() for p in kx.packs.list()],
        "active": kx.packs.active_names("alpha", None),
        # what history reads (the SQLite side from its trigger-kept projection)
        "history_rows": {
            sid: [
                (*r[:4], json.loads(r[4]) if r[4] else None, r[5])
                for r in kx.events_store.history_rows(sid, counter_key="o200k_base+0")
            ]
            for sid in ids
        },
    }


def test_copy_sqlite_to_postgres_and_back_loses_nothing(
    kairox_home: Path, tmp_path: Path, pg_server: PgTestServer, kairox: Callable[..., Result]
) -> None:
    config = KairoxConfig.model_validate(
        {"retrieval": {"workspace_index": False}, "recall": {"enabled": False}}
    )
    source = tmp_path / "mine.db"
    with Kairox.open(source, config) as kx:
        ids = _fill(kx)
        kx.compact(ids[0])  # a summary event with its replaced range
        kx.longterm.add("the launch is on Thursday", scope="global")
        kx.longterm.add("the alpha launch needs a demo", scope="project", session_id=ids[0])
        mine = kx.longterm.add("I review launches on Fridays", session_id=ids[0])
        kx.packs.create("house-rules", text="Answer in British English.")
        kx.packs.activate("house-rules", workspace_id="alpha")
        kx.packs.promote([mine.id], pack="launch-notes")  # a draft
        before = _snapshot(kx, ids)
    assert len(before["recall"]) == 3 and len(before["packs"]) == 2  # type: ignore[arg-type]
    assert before["history"] == ["vegetarian", "vegan", "vegan, no honey"]
    url = pg_server.fresh_database()
    copied = kairox("db", "copy", str(source), url)
    assert copied.returncode == 0, copied.stderr
    events = sum(len(v) for v in before["events"].values())  # type: ignore[attr-defined]
    assert events == 52 + 2 + 4  # and the two later chunks' and the packs' events
    assert f"events: {events}" in copied.stdout and "memory_history: 2" in copied.stdout
    assert "verified: 4 sessions" in copied.stdout, copied.stdout  # _longterm:global, _packs
    assert "longterm_chunks: 3" in copied.stdout and "packs_personal: 2" in copied.stdout
    assert "pack_activations: 1" in copied.stdout and "not copied" not in copied.stdout
    with Kairox.open(url, config) as kx:
        assert _snapshot(kx, ids) == before
    refused = kairox("db", "copy", str(source), url)
    assert refused.returncode == 2 and "is not empty" in refused.stderr
    back = tmp_path / "back.db"
    report = copy_database(url, str(back))
    assert report.copied["events"] == events
    assert (report.copied["longterm_chunks"], report.copied["packs_personal"]) == (3, 2)
    with Kairox.open(back, config) as kx:
        assert _snapshot(kx, ids) == before
        kx.session(workspace="alpha", session_id=ids[0]).run_turn_sync("after", "the copy")
        seqs = [e.seq for e in kx.events(ids[0])]  # appending goes on from the copied head
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > len(before["events"][ids[0]])  # type: ignore[index]


def test_a_copy_into_a_used_database_is_refused(tmp_path: Path, pg_url: str) -> None:
    config = KairoxConfig.model_validate({"retrieval": {"workspace_index": False}})
    with Kairox.open(pg_url, config) as kx:
        kx.memories.put("user", "k", "v")
    with pytest.raises(CopyError, match="1 memories"):
        copy_database(str(tmp_path / "empty.db"), pg_url)


def test_a_copy_into_a_database_with_long_term_chunks_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    config = KairoxConfig.model_validate({"retrieval": {"workspace_index": False}})
    with Kairox.open(pg_url, config) as kx:
        kx.longterm.add("kept here", scope="global")
        kx.packs.create("mine", text="x")
    with pytest.raises(CopyError, match="1 long-term chunks, 1 personal packs"):
        copy_database(str(tmp_path / "empty.db"), pg_url)


def test_the_event_log_refuses_rewrites(pg_url: str) -> None:
    with Kairox.open(pg_url, KairoxConfig()) as kx:
        kx.session(workspace="w")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in ("UPDATE events SET type = 'x'", "DELETE FROM events", "TRUNCATE events"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)


def test_index_and_search_a_folder_on_the_server(
    tmp_path: Path, kairox_home: Path, pg_url: str, kairox: Callable[..., Result]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploys\n\nThe staging server deploys every Friday.\n")
    (docs / "team.txt").write_text("Ana reviews database migrations.\n")
    first = kairox("--db", pg_url, "index", str(docs), "--json")
    assert first.returncode == 0, first.stderr
    assert '"added": 2' in first.stdout
    again = kairox("--db", pg_url, "index", str(docs), "--json")
    assert '"unchanged": 2' in again.stdout  # mtime and size: no read, no embedding
    found = kairox("--db", pg_url, "search", "when does staging deploy?", "--json")
    assert found.returncode == 0, found.stderr
    assert str(docs / "deploy.md") in found.stdout.split('"doc_id"')[1]  # the best hit
    (docs / "team.txt").unlink()
    pruned = kairox("--db", pg_url, "index", str(docs), "--json")
    assert '"removed": 1' in pruned.stdout
