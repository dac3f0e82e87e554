"""SqliteMemoryStore: the MemoryStore contract, ordering, several connections, the built-in store,
and a model-based (stateful) test against a dict."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kairox_core.markers import MemoryScope
from kairox_core.memory.backends import open_memory_store
from kairox_core.plugins import get_plugins
from kairox_core.store import SqliteMemoryStore
from kairox_core.store.database import Database
from kairox_core.testing.memory_store_contract import MemoryStoreContract


class Clock:
    def __init__(self) -> None:
        self.ticks = itertools.count(1000)

    def __call__(self) -> float:
        return float(next(self.ticks))


class TestSqliteMemoryStoreContract(MemoryStoreContract):
    def make_store(self, tmp_path: Path) -> SqliteMemoryStore:
        return SqliteMemoryStore(tmp_path / "kx.db", clock=Clock())


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SqliteMemoryStore(tmp_path / "kx.db", clock=Clock())
    yield s
    s.close()


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


def test_the_builtin_sqlite_store_shares_the_database_connection(
    kairox_home: Path, tmp_path: Path
) -> None:
    # built in, not a plugin: a plugin factory gets a path and would open a second connection
    assert "sqlite" not in get_plugins().names("memory_stores")
    db = Database.open(tmp_path / "kx.db")
    store = open_memory_store("sqlite", db)
    assert isinstance(store, SqliteMemoryStore) and store.db is db
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

    @rule(
        scope=st.sampled_from(["user", "workspace", "session"]),
        key=KEYS,
        body=BODIES,
        ws=WORKSPACES,
        sess=SESSIONS,
    )
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
            got = {
                (m.scope.value, m.owner, m.key, m.body) for m in self.store.list(workspace_id=ws)
            }
            want = {
                (s, o, k, b)
                for (s, o, k), b in self.model.items()
                if s == "user"
                or (s == "workspace" and o == ws)
                or (s == "session" and SCOPE_OF_SESSION[o] == ws)
            }
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


MemoryStoreMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestMemoryStoreModel = pytest.mark.slow(MemoryStoreMachine.TestCase)
