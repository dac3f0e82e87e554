"""The event store: append-only, per-session seqs, atomic batches, sessions, observers."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core import hookimpl
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    Event,
    GenericEvent,
    MemoryProposed,
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.store import Database, EventStore, SqliteMemoryStore
from kairox_core.store.connection import connect


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = EventStore(tmp_path / "kx.db")
    yield s
    s.close()


def msg(session: str, text: str, turn: str = "t1") -> UserMessageAdded:
    return UserMessageAdded(session_id=session, turn_id=turn, text=text)


def test_seqs_are_per_session_and_start_at_one(store: EventStore) -> None:
    a1 = store.append(msg("a", "one"))
    b1 = store.append(msg("b", "uno"))
    a2 = store.append(msg("a", "two"))
    assert (a1.seq, b1.seq, a2.seq) == (1, 1, 2)
    assert store.last_seq("a") == 2
    assert store.last_seq("b") == 1
    assert store.last_seq("nobody") == 0


def test_events_round_trip_with_their_fields(store: EventStore) -> None:
    originals: list[Event] = [
        SessionStarted(session_id="s", workspace_id="w", profile="p"),
        UserMessageAdded(
            session_id="s",
            turn_id="t",
            text="hé <memory>x</memory>",
            attachments=({"kind": "image", "filename": "a.png"},),
            tokens=7,
        ),
        ToolInvocationCompleted(
            session_id="s",
            turn_id="t",
            tool_call_id="c1",
            tool_name="grep",
            arguments="{}",
            result="r",
        ),
        AssistantMessageCompleted(
            session_id="s", turn_id="t", text="ok", usage={"prompt_tokens": 3}
        ),
        CompactionSummary(
            session_id="s",
            compaction_id="c",
            summary="sum",
            first_seq=1,
            last_seq=3,
            strategy="extractive",
            folded_summaries=(1, 2),
        ),
        MemoryProposed(
            session_id="s", proposal_id="p", scope="user", key="k", body="b", tainted=True
        ),
    ]
    stored = store.append_many(originals)
    assert [e.seq for e in stored] == list(range(1, len(originals) + 1))
    loaded = store.read("s")
    assert loaded == stored
    for original, back in zip(originals, loaded, strict=True):
        assert type(back) is type(original)
        assert back.with_seq(0) == original.with_seq(0)


def test_read_by_seq_range_and_types(store: EventStore) -> None:
    store.append(SessionStarted(session_id="s", workspace_id="w", profile="p"))
    for i in range(10):
        store.append(msg("s", f"m{i}"))
        store.append(AssistantMessageCompleted(session_id="s", turn_id="t", text=f"a{i}"))
    assert [e.seq for e in store.read("s", first_seq=5, last_seq=8)] == [5, 6, 7, 8]
    assert [e.seq for e in store.read("s", first_seq=20)] == [20, 21]
    assert [e.seq for e in store.read("s", last_seq=2)] == [1, 2]
    users = store.read("s", types=["UserMessageAdded"])
    assert len(users) == 10 and all(isinstance(e, UserMessageAdded) for e in users)
    both = store.read(
        "s", first_seq=2, last_seq=5, types={"UserMessageAdded", "AssistantMessageCompleted"}
    )
    assert [e.seq for e in both] == [2, 3, 4, 5]
    assert store.read("s", types=[]) == []
    assert store.read("s", types="UserMessageAdded") == users  # one name, not its letters
    assert store.read("other") == []


def test_unknown_event_types_load_as_generic(store: EventStore, tmp_path: Path) -> None:
    future = GenericEvent(
        session_id="s",
        type_name="QuantumThoughtAdded",
        version=3,
        data={"amplitude": [1, 2], "note": "from the future"},
    )
    stored = store.append(future)
    back = store.read("s")[0]
    assert isinstance(back, GenericEvent)
    assert back.type == "QuantumThoughtAdded" and back.version == 3
    assert back.data == {"amplitude": [1, 2], "note": "from the future"}
    assert back == stored
    row = store.conn.execute("SELECT type, version, data FROM events").fetchone()
    assert (row["type"], row["version"]) == ("QuantumThoughtAdded", 3)
    assert json.loads(row["data"])["payload"]["note"] == "from the future"


def test_a_newer_field_on_a_known_type_is_ignored(store: EventStore) -> None:
    data = msg("s", "hi").with_seq(1).to_dict()
    data["payload"]["mood"] = "added by a newer kairox"
    store.conn.execute(
        "INSERT INTO events (session_id, seq, type, version, created_at, data) "
        "VALUES ('s', 1, 'UserMessageAdded', 1, 0, ?)",
        (json.dumps(data),),
    )
    (event,) = store.read("s")
    assert isinstance(event, UserMessageAdded) and event.text == "hi"


def test_events_can_never_be_updated_or_deleted(store: EventStore) -> None:
    store.append(msg("s", "keep me"))
    with pytest.raises(Exception, match="append-only"):
        store.conn.execute("UPDATE events SET type = 'X'")
    with pytest.raises(Exception, match="append-only"):
        store.conn.execute("DELETE FROM events")
    assert [e.text for e in store.read("s")] == ["keep me"]  # type: ignore[attr-defined]


def test_duplicate_seq_is_refused_by_the_schema(store: EventStore) -> None:
    store.append(msg("s", "one"))
    data = msg("s", "two").with_seq(1).to_dict()
    with pytest.raises(Exception, match="UNIQUE"):
        store.conn.execute(
            "INSERT INTO events (session_id, seq, type, version, created_at, data) "
            "VALUES ('s', 1, 'UserMessageAdded', 1, 0, ?)",
            (json.dumps(data),),
        )


class Unserialisable:
    pass


def test_append_many_is_all_or_nothing(store: EventStore) -> None:
    store.append(msg("s", "before"))
    bad = GenericEvent(session_id="s", type_name="Broken", data={"x": Unserialisable()})
    with pytest.raises(TypeError):
        store.append_many([msg("s", "a"), msg("t", "b"), bad, msg("s", "c")])
    assert [e.seq for e in store.read("s")] == [1]
    assert store.read("t") == []
    assert store.get_session("t") is None
    assert store.append(msg("s", "after")).seq == 2


def test_bad_events_are_refused(store: EventStore) -> None:
    with pytest.raises(ValueError, match="session_id"):
        store.append(msg("", "x"))
    with pytest.raises(TypeError):
        store.append_many([{"type": "UserMessageAdded"}])  # type: ignore[list-item]
    assert store.append_many([]) == []


def test_sessions_table_follows_lifecycle_events(store: EventStore) -> None:
    store.append(
        SessionStarted(session_id="s1", workspace_id="w1", profile="fast", created_at=100.0)
    )
    store.append(msg("s1", "hi"))
    store.append(
        SessionStarted(session_id="s2", workspace_id="w2", profile="deep", created_at=200.0)
    )
    store.append(ProfileSwitched(session_id="s1", from_profile="fast", to_profile="deep"))
    store.append(SessionArchived(session_id="s2", reason="done"))
    s1 = store.get_session("s1")
    assert s1 is not None
    assert (s1.workspace_id, s1.profile, s1.created_at) == ("w1", "deep", 100.0)
    assert (s1.last_seq, s1.event_count, s1.archived) == (3, 3, False)
    s2 = store.get_session("s2")
    assert s2 is not None and s2.archived and s2.last_seq == 2
    assert [s.session_id for s in store.sessions()] == ["s1", "s2"]
    assert [s.session_id for s in store.sessions(workspace_id="w2")] == ["s2"]
    assert [s.session_id for s in store.sessions(include_archived=False)] == ["s1"]
    assert store.get_session("nope") is None
    assert s1.as_dict()["archived"] is False


def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "kx.db"
    with EventStore(path) as s:
        s.append(SessionStarted(session_id="s", workspace_id="w", profile="p"))
        s.append(msg("s", "persisted"))
    with EventStore(str(path)) as s:
        assert s.last_seq("s") == 2
        assert s.read("s")[1].text == "persisted"  # type: ignore[attr-defined]
        assert s.append(msg("s", "more")).seq == 3


def test_event_store_and_memory_store_share_one_file(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "kx.db")
    events = EventStore(db)
    memories = SqliteMemoryStore(db)
    assert events.conn is memories.conn
    tables = {r[0] for r in events.conn.execute("SELECT name FROM sqlite_master")}
    assert {"events", "sessions", "memories", "memory_history"} <= tables
    events.close()
    memories.close()
    assert not db.closed  # the opener still holds it
    db.release()
    assert db.closed


def test_a_plain_connection_can_be_shared(tmp_path: Path) -> None:
    conn = connect(tmp_path / "kx.db")
    events = EventStore(conn)
    memories = SqliteMemoryStore(conn)
    assert events.db is memories.db
    with events.db.atomic():
        events.append(msg("s", "x"))
        memories.put("user", "k", "v")
    assert events.last_seq("s") == 1
    events.close()
    memories.close()
    conn.execute("SELECT 1")  # not ours to close
    conn.close()


# --- observers -------------------------------------------------------------------------


class Recorder:
    def __init__(self, store: EventStore | None = None) -> None:
        self.seen: list[Event] = []
        self.store = store
        self.visible_seq: list[int] = []

    @hookimpl
    def kairox_on_event(self, event: Event) -> None:
        self.seen.append(event)
        if self.store is not None:
            # observers run after COMMIT: another connection already sees the event
            with EventStore(self.store.db.path or "") as other:
                self.visible_seq.append(other.last_seq(event.session_id))


def test_observers_see_committed_events_with_seq(store: EventStore, register_plugin: Any) -> None:
    rec = Recorder(store)
    register_plugin(rec, "recorder")
    stored = store.append_many([msg("s", "a"), msg("s", "b")])
    assert rec.seen == stored
    assert [e.seq for e in rec.seen] == [1, 2]
    assert rec.visible_seq == [2, 2]


def test_observers_not_called_for_a_rolled_back_batch(
    store: EventStore, register_plugin: Any
) -> None:
    rec = Recorder()
    register_plugin(rec, "recorder")
    with pytest.raises(RuntimeError), store.db.atomic():
        store.append(msg("s", "a"))
        assert rec.seen == []  # not yet: still inside the outer transaction
        raise RuntimeError("boom")
    assert rec.seen == []
    assert store.read("s") == []
    with store.db.atomic():
        store.append(msg("s", "b"))
        store.append(msg("s", "c"))
        assert rec.seen == []
    assert [e.seq for e in rec.seen] == [1, 2]


def test_a_failing_observer_never_breaks_appending(store: EventStore, register_plugin: Any) -> None:
    class Broken:
        @hookimpl
        def kairox_on_event(self, event: Event) -> None:
            raise RuntimeError("observer bug")

    register_plugin(Broken(), "broken")
    with pytest.warns(RuntimeWarning, match="observer bug"):
        stored = store.append(msg("s", "a"))
    assert stored.seq == 1 and store.last_seq("s") == 1


# --- several processes -------------------------------------------------------------------


def _append_worker(path: str, worker: int, count: int) -> None:
    store = EventStore(path)
    for i in range(count):
        if i % 5 == 4:
            store.append_many([msg("shared", f"{worker}:{i}:a"), msg("shared", f"{worker}:{i}:b")])
        else:
            store.append(msg("shared", f"{worker}:{i}"))
    store.close()


@pytest.mark.slow
def test_concurrent_processes_never_lose_or_duplicate_a_seq(tmp_path: Path) -> None:
    path = str(tmp_path / "kx.db")
    EventStore(path).close()  # migrate once up front (each worker would also do it safely)
    ctx = multiprocessing.get_context("spawn")
    workers, per_worker = 4, 40
    procs = [ctx.Process(target=_append_worker, args=(path, w, per_worker)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with EventStore(path) as store:
        events = store.read("shared")
        texts = [e.text for e in events]  # type: ignore[attr-defined]
        expected_per_worker = per_worker + per_worker // 5
        assert len(events) == workers * expected_per_worker
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len(set(texts)) == len(texts)
        for w in range(workers):
            mine = [t for t in texts if t.startswith(f"{w}:")]
            assert len(mine) == expected_per_worker
            # each worker's own appends keep their order, batches stay adjacent
            assert mine == sorted(mine, key=lambda t: (int(t.split(":")[1]), t))
        for i, t in enumerate(texts):
            if t.endswith(":a"):
                assert texts[i + 1] == t[:-1] + "b"
        info = store.get_session("shared")
        assert info is not None and info.last_seq == info.event_count == len(events)


def _crash_worker(path: str) -> None:
    class CrashingStore(EventStore):
        calls = 0

        def _insert(self, conn: Any, event: Event) -> None:
            super()._insert(conn, event)
            CrashingStore.calls += 1
            if CrashingStore.calls == 3:
                os._exit(17)  # the process dies mid-transaction: no COMMIT, no cleanup

    store = CrashingStore(path)
    store.append_many([msg("s", f"batch {i}") for i in range(5)])


@pytest.mark.slow
def test_a_crash_mid_append_leaves_no_partial_event(tmp_path: Path) -> None:
    path = str(tmp_path / "kx.db")
    with EventStore(path) as store:
        store.append(msg("s", "before"))
    proc = multiprocessing.get_context("spawn").Process(target=_crash_worker, args=(path,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 17
    with EventStore(path) as store:
        assert [e.text for e in store.read("s")] == ["before"]  # type: ignore[attr-defined]
        assert store.append(msg("s", "after")).seq == 2
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- property: the store behaves like a list per session -------------------------------------

_ops = st.lists(
    st.tuples(
        st.sampled_from(["s1", "s2", "s3"]),
        st.text(max_size=20),
        st.integers(min_value=1, max_value=3),
    ),
    max_size=30,
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(ops=_ops, lo=st.integers(0, 12), hi=st.integers(0, 12))
def test_store_matches_a_list_model(ops: list[tuple[str, str, int]], lo: int, hi: int) -> None:
    model: dict[str, list[str]] = {}
    with EventStore(":memory:") as store:
        for session, text, n in ops:
            batch = [msg(session, f"{text}#{i}") for i in range(n)]
            stored = store.append_many(batch)
            start = len(model.get(session, []))
            assert [e.seq for e in stored] == list(range(start + 1, start + n + 1))
            model.setdefault(session, []).extend(e.text for e in batch)
        for session, texts in model.items():
            events = store.read(session)
            assert [e.text for e in events] == texts  # type: ignore[attr-defined]
            assert store.last_seq(session) == len(texts)
            ranged = store.read(session, first_seq=lo, last_seq=hi)
            assert [e.seq for e in ranged] == [s for s in range(1, len(texts) + 1) if lo <= s <= hi]


def test_a_rolled_back_savepoint_emits_nothing(store: EventStore, register_plugin: Any) -> None:
    rec = Recorder()
    register_plugin(rec, "recorder")
    with store.db.atomic():
        store.append(msg("s", "kept"))
        with pytest.raises(RuntimeError), store.db.atomic():
            store.append(msg("s", "undone"))
            raise RuntimeError("inner failure")
        store.append(msg("s", "also kept"))
    assert [e.text for e in rec.seen] == ["kept", "also kept"]  # type: ignore[attr-defined]
    assert [e.seq for e in store.read("s")] == [1, 2]
