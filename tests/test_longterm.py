"""Long-term chunks: scopes, recall into the long-term block, edits and deletes as events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxUserError
from kairox_core.events import EVENT_TYPES, CompactionSummary
from kairox_core.longterm import ChunkNotFoundError, LongTermChunkDeleted, LongTermChunkEdited
from kairox_core.store.event_store import EventStore

FACT = "The staging database password rotates every Monday at 9am."
ABOUT = "When does the staging database password rotate?"
UNRELATED = "Suggest a name for my new puppy."


def config(**longterm: Any) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {"retrieval": {"workspace_index": False}, "longterm": longterm}
    )


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "k.db", config()) as kx:
        yield kx


def block(messages: list[dict[str, Any]]) -> str:
    """The long-term block's text ('' when there is none)."""
    found = [m["content"] for m in messages if "<kairox:longterm>" in (m.get("content") or "")]
    assert len(found) <= 1
    return found[0] if found else ""


def test_a_project_chunk_reaches_new_sessions_of_its_workspace_only(kx: Kairox) -> None:
    first = kx.session(workspace="w1")
    chunk = kx.longterm.add(FACT, scope="project", session_id=first.id)
    assert chunk.workspace_id == "w1"  # taken from the session

    later = kx.session(workspace="w1")
    turn = later.begin_turn_sync(ABOUT)
    assert FACT in block(turn.messages)
    layer = turn.trace.layer("longterm")
    assert [i.id for i in layer.included] == [chunk.id]
    assert "similarity" in layer.included[0].label
    turn.complete_sync("Mondays.")

    assert block(later.begin_turn_sync(UNRELATED).messages) == ""
    other = kx.session(workspace="w2")
    assert block(other.begin_turn_sync(ABOUT).messages) == ""
    assert kx.longterm.search(ABOUT, session_id=other.id, workspace_id="w2", threshold=-1) == []


def test_a_session_chunk_never_leaves_its_session(kx: Kairox) -> None:
    mine = kx.session(workspace="w1")
    kx.longterm.add(FACT, session_id=mine.id)  # scope session is the default
    assert FACT in block(mine.preview_sync(ABOUT).messages)
    sibling = kx.session(workspace="w1")
    assert block(sibling.preview_sync(ABOUT).messages) == ""
    assert kx.longterm.list(session_id=sibling.id, workspace_id="w1") == []


def test_a_global_chunk_is_visible_everywhere(kx: Kairox) -> None:
    kx.longterm.add(FACT, scope="global")
    for ws in ("w1", "w2", "w3"):
        assert FACT in block(kx.session(workspace=ws).preview_sync(ABOUT).messages)


def test_unrelated_and_empty_prompts_add_nothing_and_the_trace_says_why(kx: Kairox) -> None:
    kx.longterm.add(FACT, scope="global")
    s = kx.session(workspace="w1")
    ctx = s.preview_sync(UNRELATED)
    assert block(ctx.messages) == ""
    dropped = ctx.trace.layer("longterm").dropped
    assert dropped and "below the threshold" in (dropped[0].reason or "")
    assert block(s.preview_sync("").messages) == ""


def test_at_most_k_chunks_and_the_rest_are_traced(tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "k.db", config(k=2, threshold=0.1)) as kx:
        for day in ("Monday", "Tuesday", "Friday"):
            kx.longterm.add(f"The staging database password rotates on {day}.", scope="global")
        ctx = kx.session(workspace="w").preview_sync(ABOUT)
        layer = ctx.trace.layer("longterm")
        assert len(layer.included) == 2
        assert any("over k" in (d.reason or "") for d in layer.dropped)


def test_the_block_stays_within_its_share(tmp_path: Path) -> None:
    cfg = KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False},
            "longterm": {"share": 0.05, "threshold": 0.0, "k": 8},
            "profiles": {"default": {"context_window": 2000, "reserve": 200}},
        }
    )
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        for i in range(6):
            kx.longterm.add(f"staging database note {i}: " + "detail " * 30, scope="global")
        ctx = kx.session(workspace="w").preview_sync("staging database note")
        layer = ctx.trace.layer("longterm")
        assert layer.limit == 90 and layer.tokens <= 90
        assert any("long-term share" in (d.reason or "") for d in layer.dropped)


def test_edit_and_delete_are_events_and_change_recall(kx: Kairox) -> None:
    s = kx.session(workspace="w1")
    chunk = kx.longterm.add(FACT, scope="project", workspace_id="w1")
    edited = kx.longterm.edit(chunk.id, "The staging database password rotates every Friday.")
    assert edited.updated_at >= chunk.updated_at
    assert "Friday" in block(s.preview_sync(ABOUT).messages)
    kx.longterm.delete(chunk.id)
    assert block(s.preview_sync(ABOUT).messages) == ""
    with pytest.raises(ChunkNotFoundError):
        kx.longterm.get(chunk.id)
    trail = kx.events("_longterm:w1")
    assert [e.type for e in trail] == [
        "LongTermChunkAdded",
        "LongTermChunkEdited",
        "LongTermChunkDeleted",
    ]
    assert isinstance(trail[1], LongTermChunkEdited) and trail[1].previous_text == FACT
    assert isinstance(trail[2], LongTermChunkDeleted) and "Friday" in trail[2].text


def test_chunk_events_load_by_name_in_a_fresh_store(kx: Kairox, tmp_path: Path) -> None:
    s = kx.session(workspace="w1")
    kx.longterm.add(FACT, session_id=s.id)  # a session chunk: its events go to the session
    assert "LongTermChunkAdded" in EVENT_TYPES
    with EventStore(tmp_path / "k.db") as store:
        loaded = [e for e in store.read(s.id) if e.type == "LongTermChunkAdded"]
    assert loaded and type(loaded[0]).__name__ == "LongTermChunkAdded"


def test_scope_and_text_are_checked(kx: Kairox) -> None:
    with pytest.raises(KairoxUserError, match="needs session_id"):
        kx.longterm.add(FACT)
    with pytest.raises(KairoxUserError, match="needs workspace_id"):
        kx.longterm.add(FACT, scope="project")
    with pytest.raises(KairoxUserError, match="scope must be"):
        kx.longterm.add(FACT, scope="team", session_id="s")
    with pytest.raises(KairoxUserError, match="needs some text"):
        kx.longterm.add("  ", scope="global")


def test_list_by_scope_and_by_visibility(kx: Kairox) -> None:
    a = kx.longterm.add("a", session_id="s1", workspace_id="w1")
    b = kx.longterm.add("b", scope="project", workspace_id="w1")
    c = kx.longterm.add("c", scope="global")
    kx.longterm.add("d", scope="project", workspace_id="w2")
    assert [x.id for x in kx.longterm.list(session_id="s1", workspace_id="w1")] == [
        a.id,
        b.id,
        c.id,
    ]
    assert [x.id for x in kx.longterm.list("project", workspace_id="w1")] == [b.id]
    assert len(kx.longterm.list()) == 4


def test_a_summary_line_pinned_into_long_term_memory(kx: Kairox) -> None:
    s = kx.session(workspace="w1")
    s.run_turn_sync("hello", "hi")
    summary = kx.events_store.append(
        CompactionSummary(
            session_id=s.id,
            compaction_id="c1",
            summary="We chose Postgres.\nThe launch is on 3 March.",
            first_seq=1,
            last_seq=2,
            strategy="test",
        )
    )
    assert summary.seq is not None
    chunk = kx.longterm.pin_summary_line(s.id, summary.seq, 1)  # as `summary show` numbers
    assert (chunk.text, chunk.scope, chunk.source_seq) == (
        "The launch is on 3 March.",
        "session",  # the default scope, as /remember's
        summary.seq,
    )
    with pytest.raises(KairoxUserError, match="no line 2; its lines are: 0, 1"):
        kx.longterm.pin_summary_line(s.id, summary.seq, 2)
    s.edit_summary_sync(summary.seq, "We chose Postgres.\n\nThe launch moved to 4 March.")
    # a blank line keeps its number: line 2 is the third line, as `kairox summary show` says
    with pytest.raises(KairoxUserError, match="its lines are: 0, 2"):
        kx.longterm.pin_summary_line(s.id, summary.seq, 1)
    kept = kx.longterm.pin_summary_line(s.id, summary.seq, 2, scope="project")
    assert (kept.text, kept.scope) == ("The launch moved to 4 March.", "project")
    s.drop_chunk_sync(summary.seq, 0)  # a drop renumbers nothing
    assert kx.longterm.pin_summary_line(s.id, summary.seq, 2).text == kept.text
    with pytest.raises(KairoxUserError, match="not an active summary"):
        kx.longterm.pin_summary_line(s.id, 1, 1)


def test_a_backend_change_re_embeds_the_chunks(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    with Kairox.open(db, config()) as kx:
        kx.longterm.add(FACT, scope="global")
    other = KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False, "backend_options": {"dimension": 128}},
        }
    )
    with Kairox.open(db, other) as kx:
        hits = kx.longterm.search(ABOUT, session_id="s", workspace_id="w")
        assert [h.chunk.text for h in hits] == [FACT]
        assert kx.storage.longterm.vector_space() == (kx.longterm.store.backend.name, 128)
        assert kx.storage.longterm.chunk_counts() == (1, 1)
