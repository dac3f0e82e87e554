"""The dialect-free rules both storage backends share (store/event_rows.py, memory_rows.py)."""

from __future__ import annotations

import json

import pytest

from kairox_core.events import (
    ProfileSwitched,
    SessionArchived,
    SessionStarted,
    UserMessageAdded,
)
from kairox_core.markers import MemoryScope
from kairox_core.memory.records import Provenance
from kairox_core.store.event_rows import (
    checked_batch,
    compaction_running_seq,
    event_from_row,
    session_changes,
    skip_leading,
    wanted_types,
)
from kairox_core.store.memory_rows import (
    PutRequest,
    archived_values,
    list_filter,
    versions,
)


def test_a_batch_is_refused_whole_before_anything_is_written() -> None:
    good = UserMessageAdded(session_id="s", turn_id="t", text="hi")
    with pytest.raises(TypeError):
        checked_batch([good, "not an event"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="session_id"):
        checked_batch([good, UserMessageAdded(session_id="", turn_id="t", text="x")])
    assert checked_batch(iter([good])) == [good]


def test_lifecycle_changes_fold_in_batch_order_per_session() -> None:
    started = SessionStarted(session_id="b", workspace_id="w", profile="default", created_at=5.0)
    switched = ProfileSwitched(
        session_id="b", from_profile="default", to_profile="coding", created_at=6.0
    )
    archived = SessionArchived(session_id="a", created_at=7.0)
    msg = UserMessageAdded(session_id="a", turn_id="t", text="hi", created_at=4.0)
    changes = session_changes([msg, started, switched, archived])
    assert list(changes) == ["a", "b"]  # sorted: every writer locks sessions in one order
    a, b = changes["a"], changes["b"]
    assert (a.count, a.first_at, a.set_archived, a.archived_at) == (2, 4.0, True, 7.0)
    assert not a.set_workspace and not a.set_profile and not a.set_created
    assert (b.workspace_id, b.profile, b.created_at, b.count) == ("w", "coding", 5.0, 2)
    # the other order: the start's profile is the last word
    again = session_changes([switched, started])["b"]
    assert again.profile == "default" and again.events == [switched, started]


def test_a_compaction_runs_until_a_later_end() -> None:
    assert compaction_running_seq({}) is None
    assert compaction_running_seq({"ContextCompactionStarted": 5}) == 5
    assert (
        compaction_running_seq({"ContextCompactionStarted": 5, "ContextCompactionFailed": 6})
        is None
    )
    assert (
        compaction_running_seq({"ContextCompactionStarted": 9, "ContextCompactionCompleted": 6})
        == 9
    )


def test_a_leading_skipped_range_becomes_a_lower_bound() -> None:
    assert skip_leading([(10, 20), (1, 5)], None, 1) == (6, [(10, 20)])
    assert skip_leading([(3, 5)], None, 1) == (None, [(3, 5)])  # not at the start: kept
    assert skip_leading([(1, 5)], 2, 1) == (2, [(1, 5)])  # a bound given: untouched
    assert skip_leading([(1, 5)], None, None) == (None, [(1, 5)])  # no conversation yet


def test_rows_decode_from_text_or_decoded_json_alike() -> None:
    event = UserMessageAdded(session_id="s", turn_id="t", text="héllo").with_seq(3)
    data = event.to_dict()
    assert event_from_row(json.dumps(data)) == event_from_row(data) == event
    assert wanted_types("UserMessageAdded") == ["UserMessageAdded"]
    assert wanted_types(["b", "a", "b"]) == ["a", "b"]


def test_a_put_is_checked_and_keeps_only_the_ids_its_scope_owns() -> None:
    user = PutRequest.of("user", "diet", "vegan", workspace_id="w", session_id="s", provenance=None)
    assert (user.owner, user.workspace_id, user.session_id) == ("user", None, None)
    assert user.provenance == Provenance(session_id="s")
    ws = PutRequest.of(
        MemoryScope.WORKSPACE, "db", "pg", workspace_id="w", session_id="s", provenance=None
    )
    assert (ws.owner, ws.workspace_id, ws.session_id) == ("w", "w", None)
    sess = PutRequest.of("session", None, "note", workspace_id="w", session_id="s", provenance=None)
    assert (sess.owner, sess.session_id) == ("s", "s")
    assert sess.inserted("m-1", 3.0).approved_at is None  # never reviewed
    assert ws.inserted("m-2", 3.0).approved_at == 3.0
    assert ws.insert_values("m-2", 3.0)[:3] == ("m-2", "workspace", "w")
    assert user.lock_name != ws.lock_name
    with pytest.raises(ValueError, match="needs a key"):
        PutRequest.of("user", None, "x", workspace_id=None, session_id=None, provenance=None)
    with pytest.raises(ValueError, match="non-empty"):
        PutRequest.of("user", "k", "  ", workspace_id=None, session_id=None, provenance=None)
    with pytest.raises(ValueError, match="workspace_id"):
        PutRequest.of("workspace", "k", "x", workspace_id=None, session_id=None, provenance=None)


def _row(**kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "m-1",
        "memory_id": "m-1",
        "scope": "user",
        "owner": "user",
        "key": "diet",
        "body": "vegan",
        "workspace_id": None,
        "session_id": None,
        "created_at": 1.0,
        "updated_at": 2.0,
        "valid_from": 1.0,
        "replaced_at": 2.0,
        "ended": "replaced",
        "approved_at": 2.0,
        "prov_session_id": "s",
        "prov_turn_id": "t",
        "prov_raw": None,
    }
    row.update(kw)
    return row


def test_history_is_the_archived_versions_then_the_current_body() -> None:
    old = _row(body="vegetarian")
    current = _row(updated_at=2.0)
    got = versions(MemoryScope.USER, [old], current)
    assert [(v.body, v.ended, v.replaced_at) for v in got] == [
        ("vegetarian", "replaced", 2.0),
        ("vegan", None, None),
    ]
    assert got[0].provenance.raw == ""  # a NULL raw reads as empty
    assert versions(MemoryScope.USER, [old], None)[-1].body == "vegetarian"  # deleted key
    values = archived_values(current, 9.0, "edited")
    assert values[5:8] == (2.0, 9.0, "edited")  # valid from its last update until now
    with pytest.raises(ValueError):
        archived_values(current, 9.0, "vanished")


def test_the_list_filter_reads_the_same_in_either_dialect() -> None:
    q, params = list_filter(None, workspace_id="w", session_id=None, mark="?")
    pg, pg_params = list_filter(None, workspace_id="w", session_id=None, mark="%s")
    assert q.replace("?", "%s") == pg and params == pg_params == ["w", "w"]
    assert list_filter("user", workspace_id="w", session_id="s", mark="?") == (
        "scope = 'user'",
        [],
    )
    assert list_filter("session", workspace_id="w", session_id="s", mark="?")[1] == ["s"]
