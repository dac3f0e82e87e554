"""The one-statement append against the SQLite event store: same seqs, JSON and sessions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    UserMessageAdded,
)
from kairox_core.store.sqlite_storage import SqliteStorage
from kairox_postgres.storage import PostgresStorage


def _batches() -> list[list[Event]]:
    at = 1000.0
    return [
        [UserMessageAdded(session_id="b", turn_id="t0", text="before the start", created_at=at)],
        [  # several sessions and lifecycle changes in one batch, interleaved
            SessionStarted(session_id="b", workspace_id="w", profile="default", created_at=at + 1),
            SessionStarted(session_id="a", workspace_id="v", profile="default", created_at=at + 2),
            ProfileSwitched(
                session_id="b", from_profile="default", to_profile="coding", created_at=at + 3
            ),
            UserMessageAdded(session_id="a", turn_id="t1", text="héllo ✓", created_at=at + 4),
            AssistantMessageCompleted(session_id="b", turn_id="t1", text="ok", created_at=at + 5),
        ],
        [SessionArchived(session_id="a", reason="done", created_at=at + 6)],
        [
            ProfileSwitched(
                session_id="a", from_profile="default", to_profile="x", created_at=at + 7
            ),
            SessionStarted(session_id="a", workspace_id="v2", profile="y", created_at=at + 8),
        ],
        [UserMessageAdded(session_id="c", turn_id="t", text=str(i)) for i in range(5)],
    ]


def test_appends_match_the_sqlite_store(pg_url: str, tmp_path: Path) -> None:
    pg = PostgresStorage(pg_url)
    lite = SqliteStorage(tmp_path / "k.db")
    try:
        for batch in _batches():
            got, want = pg.events.append_many(batch), lite.events.append_many(batch)
            assert got == want
        for sid in ("a", "b", "c"):
            assert pg.events.read(sid) == lite.events.read(sid)
            assert [e.to_dict() for e in pg.events.read(sid)] == [
                e.to_dict() for e in lite.events.read(sid)
            ]  # the seq is in the stored JSON too
        assert pg.events.sessions() == lite.events.sessions()
        info = pg.events.get_session("a")
        assert info is not None
        assert (info.workspace_id, info.profile, info.archived_at) == ("v2", "y", 1006.0)
        assert (info.last_seq, info.event_count) == (5, 5)
    finally:
        pg.close()
        lite.close()


class _Observer:
    def __init__(self) -> None:
        self.seen: list[Event] = []

    @hookimpl
    def kairox_on_event(self, event: Event) -> None:
        self.seen.append(event)


def test_an_append_inside_an_undone_transaction_leaves_nothing(
    pg_url: str, register_plugin: Callable[[object, str], Any]
) -> None:
    observer = _Observer()
    register_plugin(observer, "pgturn-observer")
    pg = PostgresStorage(pg_url)
    try:
        with pytest.raises(RuntimeError), pg.atomic():
            pg.events.append(UserMessageAdded(session_id="s", turn_id="t", text="lost"))
            raise RuntimeError("undo")
        assert pg.events.read("s") == [] and pg.events.get_session("s") is None
        assert observer.seen == []  # observers hear of committed events only
        stored = pg.events.append(UserMessageAdded(session_id="s", turn_id="t", text="kept"))
        assert stored.seq == 1 and observer.seen == [stored]
        with pg.atomic():
            more = pg.events.append_many(
                [UserMessageAdded(session_id=sid, turn_id="t", text="x") for sid in "sts"]
            )
            assert observer.seen == [stored]  # not before the commit
        assert [(e.session_id, e.seq) for e in more] == [("s", 2), ("t", 1), ("s", 3)]
        assert observer.seen == [stored, *more]
    finally:
        pg.close()
