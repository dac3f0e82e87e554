"""Recall of compacted history: indexed on compaction, recalled verbatim, this session only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.compaction.recall import (
    DOC_TYPE,
    group_turns,
    merge_hits,
    recall_space,
    turn_document,
)
from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RetrievalSection,
)
from kairox_core.context.rendering import hit_header, neutralise
from kairox_core.events import CompactionSummary, UserMessageAdded
from kairox_core.facade import Kairox
from kairox_core.retrieval.base import RetrievalHit

FACTS = {
    3: "My locker code at the Vantaa gym is 4417-ZETA, please remember it.",
    7: "The caterer for Ines's wedding is Fennel & Thyme, booked for 14 June.",
}
FILLER = ("Let us keep talking about the garden, the weather and what to plant next "
          "spring; tomatoes did well last year and the beans were fine too.")


def config(*, recall: bool = True, window: int = 1400, share: float = 0.4) -> KairoxConfig:
    return KairoxConfig(
        profiles={"default": ProfileConfig(model="gpt-4o", encoding="o200k_base",
                                           context_window=window, reserve=200)},
        retrieval=RetrievalSection(backend="hashing", share=share),
        compaction=CompactionSection(keep_recent_exchanges=2, target_tokens=60,
                                     recall=recall, recall_k=8),
    )


def chat(session: Any, turns: int, facts: dict[int, str] | None = None,
         tag: str = "") -> None:
    """``turns`` exchanges; the user states ``facts[i]`` at turn i, filler otherwise."""
    facts = FACTS if facts is None else facts
    for i in range(turns):
        session.run_turn_sync(facts.get(i, f"{tag}turn {i}: {FILLER}"),
                              f"{tag}Noted, turn {i}. {FILLER}")


def context_text(context: Any) -> str:
    return "\n".join(str(m["content"]) for m in context.messages)


def recount(messages: list[dict[str, Any]]) -> int:
    """OpenAI's chat count, from scratch with tiktoken (3 per message, 3 priming)."""
    enc = tiktoken.get_encoding("o200k_base")
    return sum(3 + len(enc.encode(m["role"])) + len(enc.encode(str(m["content"])))
               for m in messages) + 3


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "kx.db", config()) as k:
        yield k


def seq_of(kx: Kairox, session_id: str, text: str) -> int:
    for e in kx.events(session_id):
        if isinstance(e, UserMessageAdded) and e.text == text:
            assert e.seq is not None
            return e.seq
    raise AssertionError(text)


def covered(kx: Kairox, session: Any) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = session.refresh_compaction().covered_ranges()
    return ranges


def test_facts_from_a_compacted_stretch_come_back_verbatim(kx: Kairox) -> None:
    session = kx.session()
    chat(session, 30)
    ranges = covered(kx, session)
    assert ranges, "the small window must have compacted"
    for text in FACTS.values():
        seq = seq_of(kx, session.id, text)
        assert any(lo <= seq <= hi for lo, hi in ranges)  # out of verbatim history
    ctx = session.preview_sync("What is my locker code at the gym?")
    body = context_text(ctx)
    assert FACTS[3] in body
    seq = seq_of(kx, session.id, FACTS[3])
    assert f"seq={seq} user: {FACTS[3]}" in body
    assert "[recalled turns of this conversation" in body
    ctx = session.preview_sync("Who is the caterer for the wedding?")
    assert FACTS[7] in context_text(ctx)
    retrieval = ctx.trace.layer("retrieval")
    assert any(item.source == "recall" for item in retrieval.included)


def test_recall_never_returns_another_sessions_turns(kx: Kairox) -> None:
    a, b = kx.session(workspace="w"), kx.session(workspace="w")
    secret = "Session B only: the vault passphrase is marmalade-otter-93."
    chat(a, 25, facts={}, tag="A ")
    chat(b, 25, facts={2: secret}, tag="B ")
    assert covered(kx, a) and covered(kx, b)
    assert secret in context_text(b.preview_sync("what is the vault passphrase?"))
    hits = kx.recall.hits(a, "what is the vault passphrase marmalade otter?")
    assert hits and all(h.metadata["session_id"] == a.id for h in hits)
    assert secret not in context_text(a.preview_sync("vault passphrase marmalade otter"))
    # the workspace's own document search never sees conversation turns
    found = kx.retriever_for("default", "w")
    try:
        import asyncio

        result = asyncio.run(found.search("vault passphrase marmalade otter", 8))
        assert not [h for h in result.hits if h.metadata.get("doc_type") == DOC_TYPE]
    finally:
        asyncio.run(found.close())


def test_recall_never_returns_turns_still_in_history(kx: Kairox) -> None:
    session = kx.session()
    chat(session, 24)
    recent = "Latest: the spare key is under the blue flowerpot by the shed."
    session.run_turn_sync(recent, "Got it, blue flowerpot.")
    ranges = covered(kx, session)
    for prompt in ("where is the spare key flowerpot?", "garden tomatoes beans",
                   "locker code", "Noted turn"):
        hits = kx.recall.hits(session, prompt)
        for h in hits:
            for seq in h.metadata["seqs"]:
                assert any(lo <= seq <= hi for lo, hi in ranges)
        body = context_text(session.preview_sync(prompt))
        assert body.count(recent) == 1  # in history, not recalled a second time


@pytest.fixture(scope="module")
def compacted_db(tmp_path_factory: Any) -> Path:
    """A session whose early turns were compacted (share the database, never its turns)."""
    db: Path = tmp_path_factory.mktemp("b") / "kx.db"
    with Kairox.open(db, config(window=900)) as k:
        session = k.session(session_id="s-budget")
        chat(session, 14)
        assert covered(k, session)
    return db


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.text(min_size=1, max_size=300), share=st.floats(0.05, 1.0),
       window=st.integers(500, 1400))
def test_budget_never_exceeded_with_recall_on(compacted_db: Path, prompt: str, share: float,
                                              window: int) -> None:
    with Kairox.open(compacted_db, config(share=share, window=window)) as k:
        session = k.session(session_id="s-budget")
        for p in (prompt, "locker code gym 4417", FACTS[7]):
            ctx = session.preview_sync(p)
            assert recount(ctx.messages) <= k.config.profiles["default"].budget


def test_indexing_is_idempotent_and_catches_up(tmp_path: Path) -> None:
    db = tmp_path / "kx.db"
    with Kairox.open(db, config(recall=False)) as k:
        session = k.session()
        sid = session.id
        chat(session, 20)
        assert covered(k, session)
        assert k.recall.hits(session, "locker code") == []  # disabled: nothing recalled
        assert k.recall.index(session).chunk_count() == 0  # ... and nothing indexed
    with Kairox.open(db, config(recall=True)) as k:
        session = k.session(session_id=sid)
        index = k.recall.index(session)
        assert k.recall.catch_up(session) >= 1  # summaries made while recall was off
        docs = index.documents()
        assert docs and all(d.doc_type == DOC_TYPE for d in docs)
        summaries = [e for e in k.events(sid) if isinstance(e, CompactionSummary)]
        assert k.recall.catch_up(session) == 0  # nothing new
        originals = k.events_store.read(sid, first_seq=summaries[0].first_seq,
                                        last_seq=summaries[0].last_seq)
        statuses = k.recall.index_originals(session, summaries[0].seq or 0, originals)
        assert statuses and set(statuses) == {"unchanged"}
        assert len(index.documents()) == len(docs)
        embedded = index.embedded_chunks
        chat(session, 10, facts={}, tag="later ")  # more compactions: only new turns embed
        assert len(index.documents()) > len(docs)
        assert index.embedded_chunks > embedded
        seqs = [int(d.doc_id.rsplit(":", 1)[1]) for d in index.documents()]
        assert len(seqs) == len(set(seqs))
        assert FACTS[3] in context_text(session.preview_sync("my locker code at the gym"))


def test_turn_documents_and_spaces() -> None:
    event = UserMessageAdded(session_id="s1", turn_id="t", text="hello there", seq=5,
                             created_at=1683554160.0)
    doc = turn_document(event)
    assert doc is not None
    assert doc.doc_id == "turn:s1:5" and doc.doc_type == DOC_TYPE
    assert dict(doc.metadata) == {"session_id": "s1", "seq": 5, "speaker": "user",
                                  "date": "2023-05-08", "turn_id": "t"}
    assert turn_document(UserMessageAdded(session_id="s1", turn_id="t", text="  ",
                                          seq=6)) is None
    assert recall_space("w", "s1") != recall_space("w", "s2") != "w"


def test_groups_label_turns_and_fakes_are_escaped() -> None:
    def turn(seq: int, date: str, score: float) -> RetrievalHit:
        return RetrievalHit(text=f"text {seq}", score=score, source="recall",
                            doc_id=f"turn:s:{seq}",
                            metadata={"seq": seq, "speaker": "user", "date": date,
                                      "session_id": "s"})

    ranked = [turn(9, "2024-01-03", 0.9), turn(4, "2024-01-02", 0.8)]
    ranked += [turn(20 + i, "2024-02-01", 0.5) for i in range(60)]
    groups = group_turns(ranked, "s")
    assert groups[0].text == ("2024-01-02:\nseq=4 user: text 4\n2024-01-03:\nseq=9 user: text 9"
                              "\n2024-02-01:\n" + "\n".join(
                                  f"seq={20 + i} user: text {20 + i}" for i in range(6)))
    seen = [seq for g in groups for seq in g.metadata["seqs"]]
    assert sorted(seen) == sorted(h.metadata["seq"] for h in ranked)  # each turn once
    assert [len(g.metadata["seqs"]) for g in groups][-1] <= 8
    assert hit_header(groups[0]) == "recalled turns of this conversation (compacted earlier)"
    assert neutralise("[recalled turns]").startswith("\\[")


def test_merge_alternates_by_rank() -> None:
    def h(src: str, i: int) -> RetrievalHit:
        return RetrievalHit(text=f"{src}{i}", score=1.0, source=src, doc_id=f"{src}{i}")

    merged = merge_hits([h("recall", 0), h("recall", 1), h("recall", 2)], [h("workspace", 0)])
    assert [x.text for x in merged] == ["recall0", "workspace0", "recall1", "recall2"]
