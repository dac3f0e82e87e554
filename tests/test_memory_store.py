"""SqliteMemoryStore: scopes, owners, history, isolation, archive, and a model-based test."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kairox_core.markers import MemoryScope
from kairox_core.memory import (
    MemoryNotFoundError,
    MemoryRecord,
    MemoryStore,
    Provenance,
    UnknownScopeError,
)
from kairox_core.plugins import get_plugins
from kairox_core.store import SqliteMemoryStore


class Clock:
    def __init__(self) -> None:
        self.ticks = itertools.count(1000)

    def __call__(self) -> float:
        return float(next(self.ticks))


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SqliteMemoryStore(tmp_path / "kx.db", clock=Clock())
    yield s
    s.close()


def test_it_is_a_memory_store(store: SqliteMemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_put_and_get_each_scope(store: SqliteMemoryStore) -> None:
    prov = Provenance(session_id="s1", turn_id="t1",
                      raw='<memory scope="user" key="lang">Python</memory>')
    user = store.put(MemoryScope.USER, "lang", "Python", provenance=prov, workspace_id="w1")
    ws = store.put("workspace", "build", "uses nox", workspace_id="w1")
    sess = store.put("session", "goal", "fix the bug", session_id="s1", workspace_id="w1")
    assert user.scope is MemoryScope.USER and user.workspace_id is None
    assert user.approved_at is not None and user.provenance == prov
    assert ws.workspace_id == "w1" and ws.approved_at is not None
    assert sess.approved_at is None and sess.session_id == "s1" and sess.workspace_id == "w1"
    assert store.get("user", "lang") == user
    assert store.get("user", "lang", workspace_id="elsewhere") == user  # user memories are global
    assert store.get("workspace", "build", workspace_id="w1") == ws
    assert store.get("session", "goal", session_id="s1") == sess
    assert store.get_by_id(ws.id) == ws
    assert store.get("user", "missing") is None
    assert store.get_by_id("m-nope") is None
    assert (user.owner, ws.owner, sess.owner) == ("user", "w1", "s1")


def test_accepted_write_replaces_body_and_keeps_history(store: SqliteMemoryStore) -> None:
    first = store.put("workspace", "db", "postgres 14", workspace_id="w",
                      provenance=Provenance("s1", "t1", "raw1"))
    second = store.put("workspace", "db", "postgres 16", workspace_id="w",
                       provenance=Provenance("s2", "t9", "raw2"))
    assert second.id == first.id
    assert second.body == "postgres 16"
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert second.provenance.turn_id == "t9"
    history = store.history("workspace", "db", workspace_id="w")
    assert [(v.body, v.ended) for v in history] == [("postgres 14", "replaced"),
                                                   ("postgres 16", None)]
    assert history[0].provenance.raw == "raw1"
    assert history[0].replaced_at == history[1].valid_from
    assert len(store.list("workspace", workspace_id="w")) == 1


def test_unchanged_body_is_not_a_new_version(store: SqliteMemoryStore) -> None:
    a = store.put("user", "k", "same")
    b = store.put("user", "k", "same")
    assert a == b
    assert len(store.history("user", "k")) == 1


def test_keys_are_unique_per_scope_and_owner(store: SqliteMemoryStore) -> None:
    a = store.put("workspace", "k", "a", workspace_id="w1")
    b = store.put("workspace", "k", "b", workspace_id="w2")
    c = store.put("user", "k", "c")
    d = store.put("session", "k", "d", session_id="s")
    assert len({a.id, b.id, c.id, d.id}) == 4
    assert store.get("workspace", "k", workspace_id="w1").body == "a"  # type: ignore[union-attr]
    assert store.get("workspace", "k", workspace_id="w2").body == "b"  # type: ignore[union-attr]


def test_lookups_never_cross_workspaces(store: SqliteMemoryStore) -> None:
    store.put("workspace", "secret", "w1 only", workspace_id="w1")
    store.put("session", "note", "w1 session", session_id="s1", workspace_id="w1")
    store.put("workspace", "other", "w2 stuff", workspace_id="w2")
    store.put("user", "name", "Ada")
    assert store.get("workspace", "secret", workspace_id="w2") is None
    assert store.history("workspace", "secret", workspace_id="w2") == []
    w2 = store.list(workspace_id="w2")
    assert {m.body for m in w2} == {"w2 stuff", "Ada"}
    assert {m.body for m in store.list("workspace", workspace_id="w2")} == {"w2 stuff"}
    assert store.list("session", workspace_id="w2") == []
    assert store.list("session", session_id="s2") == []
    with pytest.raises(ValueError, match="workspace_id"):
        store.get("workspace", "secret")
    with pytest.raises(ValueError, match="session_id"):
        store.get("session", "note")


def test_list_filters_and_orders_newest_first(store: SqliteMemoryStore) -> None:
    store.put("user", "a", "1")
    store.put("workspace", "b", "2", workspace_id="w")
    store.put("session", None, "3", session_id="s", workspace_id="w")
    store.put("session", None, "4", session_id="s2", workspace_id="w")
    store.put("user", "a", "1b")  # updated: now the newest
    assert [m.body for m in store.list()] == ["1b", "4", "3", "2"]
    assert [m.body for m in store.list(workspace_id="w", session_id="s")] == ["1b", "3", "2"]
    assert [m.body for m in store.list("session")] == ["4", "3"]
    assert [m.body for m in store.list("session", workspace_id="w")] == ["4", "3"]
    assert [m.body for m in store.list(MemoryScope.USER)] == ["1b"]


def test_keyless_session_memories_are_each_their_own(store: SqliteMemoryStore) -> None:
    a = store.put("session", None, "one", session_id="s")
    b = store.put("session", None, "two", session_id="s")
    assert a.id != b.id and a.key is None
    with pytest.raises(ValueError, match="needs a key"):
        store.put("user", None, "x")


def test_update_body_and_delete_keep_history(store: SqliteMemoryStore) -> None:
    rec = store.put("user", "editor", "vim")
    edited = store.update_body(rec.id, "helix")
    assert edited.body == "helix" and edited.id == rec.id
    assert store.update_body(rec.id, "helix") == edited
    assert store.delete(rec.id) is True
    assert store.delete(rec.id) is False
    assert store.get("user", "editor") is None
    assert [(v.body, v.ended) for v in store.history("user", "editor")] == [
        ("vim", "edited"), ("helix", "deleted")]
    with pytest.raises(MemoryNotFoundError, match="m-nope"):
        store.update_body("m-nope", "x")
    again = store.put("user", "editor", "emacs")
    assert again.id != rec.id
    assert [v.body for v in store.history("user", "editor")] == ["vim", "helix", "emacs"]


def test_archive_session_discards_only_its_session_memories(store: SqliteMemoryStore) -> None:
    store.put("session", "a", "1", session_id="s1")
    store.put("session", "a", "1b", session_id="s1")
    store.put("session", None, "2", session_id="s1")
    keep = store.put("session", "a", "3", session_id="s2")
    user = store.put("user", "u", "stays")
    ws = store.put("workspace", "w", "stays", workspace_id="s1")  # a workspace named like it
    assert store.archive_session("s1") == 2
    assert store.list("session", session_id="s1") == []
    assert store.history("session", "a", session_id="s1") == []
    assert store.list("session") == [keep]
    assert store.get_by_id(user.id) == user and store.get_by_id(ws.id) == ws
    assert store.archive_session("s1") == 0


def test_bad_input_is_refused(store: SqliteMemoryStore) -> None:
    with pytest.raises(UnknownScopeError, match="session, user, workspace"):
        store.put("global", "k", "v")
    with pytest.raises(UnknownScopeError):
        store.list("team")
    with pytest.raises(ValueError, match="non-empty"):
        store.put("user", "k", "   ")
    with pytest.raises(ValueError, match="workspace_id"):
        store.put("workspace", "k", "v")


def test_changes_from_another_connection_show_immediately(tmp_path: Path) -> None:
    a = SqliteMemoryStore(tmp_path / "kx.db")
    b = SqliteMemoryStore(tmp_path / "kx.db")
    rec = a.put("user", "k", "v1")
    assert b.get("user", "k") == rec
    b.update_body(rec.id, "v2")
    assert a.get("user", "k").body == "v2"  # type: ignore[union-attr]
    b.delete(rec.id)
    assert a.list() == []
    a.close()
    b.close()


def test_sqlite_store_is_registered_as_a_plugin(kairox_home: Path, tmp_path: Path) -> None:
    reg = get_plugins().get("memory_stores", "sqlite")
    assert reg.plugin == "kairox_core.default_plugins.sqlite_memory"
    store = reg.factory(str(tmp_path / "kx.db"))
    assert isinstance(store, SqliteMemoryStore)
    store.close()


# --- model-based: the store behaves like a dict of (scope, owner, key) -> body ---------------

KEYS = st.sampled_from(["a", "b", "c.d", "x-1"])
WORKSPACES = st.sampled_from(["w1", "w2"])
SESSIONS = st.sampled_from(["s1", "s2", "s3"])
BODIES = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")
SCOPE_OF_SESSION = {"s1": "w1", "s2": "w1", "s3": "w2"}


class MemoryStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = SqliteMemoryStore(":memory:", clock=Clock())
        self.model: dict[tuple[str, str, str], str] = {}
        self.history: dict[tuple[str, str, str], list[str]] = {}
        self.ids: dict[tuple[str, str, str], str] = {}

    def _ids(self, scope: str, owner: str) -> dict[str, str | None]:
        if scope == "workspace":
            return {"workspace_id": owner}
        if scope == "session":
            return {"session_id": owner, "workspace_id": SCOPE_OF_SESSION[owner]}
        return {}

    def _write(self, slot: tuple[str, str, str], body: str) -> None:
        if self.model.get(slot) != body:
            self.history.setdefault(slot, []).append(body)
        self.model[slot] = body

    @rule(scope=st.sampled_from(["user", "workspace", "session"]), key=KEYS, body=BODIES,
          ws=WORKSPACES, sess=SESSIONS)
    def put(self, scope: str, key: str, body: str, ws: str, sess: str) -> None:
        owner = {"user": "user", "workspace": ws, "session": sess}[scope]
        rec = self.store.put(scope, key, body, **self._ids(scope, owner))  # type: ignore[arg-type]
        slot = (scope, owner, key)
        if slot in self.ids:
            assert rec.id == self.ids[slot]
        self.ids[slot] = rec.id
        self._write(slot, body)

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data(), body=BODIES)
    def edit(self, data: st.DataObject, body: str) -> None:
        slot = data.draw(st.sampled_from(sorted(self.ids)))
        self.store.update_body(self.ids[slot], body)
        self._write(slot, body)

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(sorted(self.ids)))
        assert self.store.delete(self.ids.pop(slot))
        del self.model[slot]

    @rule(sess=SESSIONS)
    def archive(self, sess: str) -> None:
        expected = [s for s in self.model if s[0] == "session" and s[1] == sess]
        assert self.store.archive_session(sess) == len(expected)
        for slot in expected:
            del self.model[slot]
            del self.ids[slot]
        for slot in [s for s in self.history if s[0] == "session" and s[1] == sess]:
            del self.history[slot]  # discarded with its session, earlier bodies included

    @invariant()
    def lookups_match_the_model(self) -> None:
        for (scope, owner, key), body in self.model.items():
            rec = self.store.get(scope, key, **self._ids(scope, owner))  # type: ignore[arg-type]
            assert rec is not None and rec.body == body and rec.id == self.ids[(scope, owner, key)]
        for ws in ("w1", "w2"):
            got = {(m.scope.value, m.owner, m.key, m.body)
                   for m in self.store.list(workspace_id=ws)}
            want = {(s, o, k, b) for (s, o, k), b in self.model.items()
                    if s == "user" or (s == "workspace" and o == ws)
                    or (s == "session" and SCOPE_OF_SESSION[o] == ws)}
            assert got == want
        assert len(self.store.list()) == len(self.model)

    @invariant()
    def history_keeps_every_body(self) -> None:
        for (scope, owner, key), bodies in self.history.items():
            versions = self.store.history(scope, key, **self._ids(scope, owner))  # type: ignore[arg-type]
            assert [v.body for v in versions] == bodies
            current = [v for v in versions if v.replaced_at is None]
            if (scope, owner, key) in self.model:
                assert len(current) == 1 and versions[-1] is current[0]
            else:
                assert current == []

    def teardown(self) -> None:
        self.store.close()


MemoryStoreMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25,
                                                deadline=None)
TestMemoryStoreModel = MemoryStoreMachine.TestCase


def test_record_as_dict_is_json_ready(store: SqliteMemoryStore) -> None:
    import json

    rec: MemoryRecord = store.put("user", "k", "v", provenance=Provenance("s", "t", "raw"))
    data = json.loads(json.dumps(rec.as_dict()))
    assert data["scope"] == "user" and data["provenance"]["raw"] == "raw"
