"""Property: any sequence of adds, edits and deletes keeps rows, vectors and visibility
consistent with a plain model of the chunks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.config import KairoxConfig

pytestmark = pytest.mark.slow

SESSIONS = {"s1": "w1", "s2": "w1", "s3": "w2"}  # session -> its workspace
texts = st.lists(
    st.sampled_from(["deploy", "Friday", "tea", "Ada", "staging", "password", "日本", "42"]),
    min_size=1,
    max_size=8,
).map(" ".join)
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(["session", "project", "global"]),
            st.sampled_from(sorted(SESSIONS)),
            texts,
        ),
        st.tuples(st.just("edit"), st.integers(0, 20), st.just(""), texts),
        st.tuples(st.just("delete"), st.integers(0, 20), st.just(""), st.just("")),
    ),
    min_size=1,
    max_size=25,
)


def visible(chunk: dict[str, str], session: str) -> bool:
    if chunk["scope"] == "session":
        return chunk["session"] == session
    if chunk["scope"] == "project":
        return chunk["workspace"] == SESSIONS[session]
    return True


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=ops, query=texts)
def test_store_matches_the_model(tmp_path_factory, ops, query) -> None:
    cfg = KairoxConfig.model_validate({"retrieval": {"workspace_index": False}})
    db = tmp_path_factory.mktemp("ltstore") / "k.db"
    model: dict[str, dict[str, str]] = {}
    with Kairox.open(db, cfg) as kx:
        for op, a, session, text in ops:
            if op == "add":
                c = kx.longterm.add(
                    text, scope=a, session_id=session, workspace_id=SESSIONS[session]
                )
                model[c.id] = {"scope": a, "session": session, "workspace": SESSIONS[session]}
                model[c.id]["text"] = text
            elif model:
                cid = sorted(model)[a % len(model)]
                if op == "edit":
                    assert kx.longterm.edit(cid, text).text == text
                    model[cid]["text"] = text
                else:
                    kx.longterm.delete(cid)
                    del model[cid]
        rows = db_count(kx, "SELECT count(*) FROM longterm_chunks")
        table = kx.storage.longterm.table  # type: ignore[attr-defined]  # the first add made it
        vectors = db_count(kx, f"SELECT count(*) FROM {table}") if table else 0
        assert rows == vectors == len(model)
        assert kx.storage.longterm.chunk_counts() == (rows, vectors)
        assert {c.id: c.text for c in kx.longterm.list()} == {
            k: v["text"] for k, v in model.items()
        }
        for session, ws in SESSIONS.items():
            seen = {c.id for c in kx.longterm.list(session_id=session, workspace_id=ws)}
            assert seen == {k for k, v in model.items() if visible(v, session)}
            hits = kx.longterm.search(query, session_id=session, workspace_id=ws, k=5, threshold=-1)
            assert {h.chunk.id for h in hits} <= seen
            assert len(hits) == min(5, len(seen))  # no threshold: the k nearest visible
            sims = [h.similarity for h in hits]
            assert sims == sorted(sims, reverse=True)
        events = sum(1 for op in ops if op[0] == "add")
        added = [
            e
            for sid in {*SESSIONS, "_longterm:w1", "_longterm:w2", "_longterm:global"}
            for e in kx.events(sid)
            if e.type == "LongTermChunkAdded"
        ]
        assert len(added) == events


def db_count(kx: Kairox, sql: str) -> int:
    db = kx.storage.db  # type: ignore[attr-defined]
    with db.lock:
        return int(db.conn.execute(sql).fetchone()[0])
