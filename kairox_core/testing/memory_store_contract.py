"""Contract tests every ``MemoryStore`` backend must pass.

A backend's test suite subclasses ``MemoryStoreContract`` and implements ``make_store``
(``kairox-core`` does so for ``SqliteMemoryStore`` in ``tests/test_memory_store.py``)::

    class TestMyStore(MemoryStoreContract):
        def make_store(self, tmp_path):
            return MyStore(tmp_path / "kx.db")
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_core.markers import MemoryScope
from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import (
    MemoryNotFoundError,
    MemoryRecord,
    Provenance,
    UnknownScopeError,
)


class MemoryStoreContract:
    """Scopes, owners, history, workspace isolation, archive and input checks."""

    def make_store(self, tmp_path: Path) -> MemoryStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[MemoryStore]:
        s = self.make_store(tmp_path)
        yield s
        s.close()

    def test_it_is_a_memory_store(self, store: MemoryStore) -> None:
        assert isinstance(store, MemoryStore)

    def test_put_and_get_each_scope(self, store: MemoryStore) -> None:
        prov = Provenance(
            session_id="s1", turn_id="t1", raw='<memory scope="user" key="lang">Python</memory>'
        )
        user = store.put(MemoryScope.USER, "lang", "Python", provenance=prov, workspace_id="w1")
        ws = store.put("workspace", "build", "uses nox", workspace_id="w1")
        sess = store.put("session", "goal", "fix the bug", session_id="s1", workspace_id="w1")
        assert user.scope is MemoryScope.USER and user.workspace_id is None
        assert user.approved_at is not None and user.provenance == prov
        assert ws.workspace_id == "w1" and ws.approved_at is not None
        assert sess.approved_at is None and sess.session_id == "s1" and sess.workspace_id == "w1"
        assert store.get("user", "lang") == user
        assert store.get("user", "lang", workspace_id="elsewhere") == user  # global
        assert store.get("workspace", "build", workspace_id="w1") == ws
        assert store.get("session", "goal", session_id="s1") == sess
        assert store.get_by_id(ws.id) == ws
        assert store.get("user", "missing") is None
        assert store.get_by_id("m-nope") is None
        assert (user.owner, ws.owner, sess.owner) == ("user", "w1", "s1")

    def test_accepted_write_replaces_body_and_keeps_history(self, store: MemoryStore) -> None:
        first = store.put(
            "workspace",
            "db",
            "postgres 14",
            workspace_id="w",
            provenance=Provenance("s1", "t1", "raw1"),
        )
        second = store.put(
            "workspace",
            "db",
            "postgres 16",
            workspace_id="w",
            provenance=Provenance("s2", "t9", "raw2"),
        )
        assert second.id == first.id
        assert second.body == "postgres 16"
        assert second.created_at == first.created_at and second.updated_at >= first.updated_at
        assert second.provenance.turn_id == "t9"
        history = store.history("workspace", "db", workspace_id="w")
        assert [(v.body, v.ended) for v in history] == [
            ("postgres 14", "replaced"),
            ("postgres 16", None),
        ]
        assert history[0].provenance.raw == "raw1"
        assert history[0].replaced_at == history[1].valid_from
        assert len(store.list("workspace", workspace_id="w")) == 1

    def test_unchanged_body_is_not_a_new_version(self, store: MemoryStore) -> None:
        a = store.put("user", "k", "same")
        b = store.put("user", "k", "same")
        assert a == b
        assert len(store.history("user", "k")) == 1

    def test_keys_are_unique_per_scope_and_owner(self, store: MemoryStore) -> None:
        a = store.put("workspace", "k", "a", workspace_id="w1")
        b = store.put("workspace", "k", "b", workspace_id="w2")
        c = store.put("user", "k", "c")
        d = store.put("session", "k", "d", session_id="s")
        assert len({a.id, b.id, c.id, d.id}) == 4
        assert store.get("workspace", "k", workspace_id="w1").body == "a"  # type: ignore[union-attr]
        assert store.get("workspace", "k", workspace_id="w2").body == "b"  # type: ignore[union-attr]

    def test_lookups_never_cross_workspaces(self, store: MemoryStore) -> None:
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

    def test_keyless_session_memories_are_each_their_own(self, store: MemoryStore) -> None:
        a = store.put("session", None, "one", session_id="s")
        b = store.put("session", None, "two", session_id="s")
        assert a.id != b.id and a.key is None
        with pytest.raises(ValueError, match="needs a key"):
            store.put("user", None, "x")

    def test_update_body_and_delete_keep_history(self, store: MemoryStore) -> None:
        rec = store.put("user", "editor", "vim")
        edited = store.update_body(rec.id, "helix")
        assert edited.body == "helix" and edited.id == rec.id
        assert store.update_body(rec.id, "helix") == edited
        assert store.delete(rec.id) is True
        assert store.delete(rec.id) is False
        assert store.get("user", "editor") is None
        assert [(v.body, v.ended) for v in store.history("user", "editor")] == [
            ("vim", "edited"),
            ("helix", "deleted"),
        ]
        with pytest.raises(MemoryNotFoundError, match="m-nope"):
            store.update_body("m-nope", "x")
        again = store.put("user", "editor", "emacs")
        assert again.id != rec.id
        assert [v.body for v in store.history("user", "editor")] == ["vim", "helix", "emacs"]

    def test_archive_session_discards_only_its_session_memories(self, store: MemoryStore) -> None:
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

    def test_bad_input_is_refused(self, store: MemoryStore) -> None:
        with pytest.raises(UnknownScopeError, match="session, user, workspace"):
            store.put("global", "k", "v")
        with pytest.raises(UnknownScopeError):
            store.list("team")
        with pytest.raises(ValueError, match="non-empty"):
            store.put("user", "k", "   ")
        with pytest.raises(ValueError, match="workspace_id"):
            store.put("workspace", "k", "v")

    def test_record_as_dict_is_json_ready(self, store: MemoryStore) -> None:
        rec: MemoryRecord = store.put("user", "k", "v", provenance=Provenance("s", "t", "raw"))
        data = json.loads(json.dumps(rec.as_dict()))
        assert data["scope"] == "user" and data["provenance"]["raw"] == "raw"
