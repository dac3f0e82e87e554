"""A fast default turn (issue 18 item 3): recall indexes off the turn's critical path,
a bulk load indexes a whole session, and the keyword query reads only the terms that
can rank. Correctness only: speed is benchmarks/bench_context.py's job."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)
from kairox_core.events import AssistantMessageCompleted, UserMessageAdded
from kairox_core.facade import Kairox
from kairox_core.recall import engine as recall_module
from kairox_core.recall.engine import recall_of
from kairox_core.retrieval import keyword_terms
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.fts import query_terms
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex
from kairox_core.sync import run_sync


def config(recall: bool = True) -> KairoxConfig:
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=4000, reserve=200
            )
        },
        retrieval=RetrievalSection(backend="hashing"),
        compaction=CompactionSection(enabled=False),
        recall=RecallSection(enabled=recall),
    )


def test_the_next_turn_finds_the_turn_indexed_in_the_background(tmp_path: Path) -> None:
    """``complete()`` returns before its turn is indexed; the next search still finds
    it (it waits for the background work or indexes the turn itself)."""

    async def drive() -> tuple[list[str], tuple[int, int] | None, int]:
        kx = Kairox.open(tmp_path / "kx.db", config())
        session = kx.session()
        recall = recall_of(kx)
        turn = await session.begin_turn("The spare key is under the blue flowerpot.")
        await turn.complete("Noted: blue flowerpot.")
        pending = len(recall._pending)
        hits = await asyncio.to_thread(recall.turns, session, "where is the flowerpot key?")
        await asyncio.gather(*list(recall._pending))  # the background catch-up, if later
        progress = recall.progress(session.id)
        await kx.aclose()  # waits for background indexing before the storage closes
        return [h.text for h in hits], progress, pending

    texts, progress, pending = asyncio.run(drive())
    assert pending <= 1
    assert "The spare key is under the blue flowerpot." in texts
    assert "Noted: blue flowerpot." in texts
    assert progress is not None and progress[0] == 0


def test_a_failed_background_index_is_retried_by_the_next_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Kairox.open(tmp_path / "kx.db", config()) as kx:
        session = kx.session()
        recall = recall_of(kx)
        real = recall._catch_up
        failing = {"on": False, "raised": 0}

        def flaky(s: object) -> int:
            if failing["on"]:
                failing["on"] = False
                failing["raised"] += 1
                raise RuntimeError("disk hiccup")
            return real(session)

        monkeypatch.setattr(recall, "_catch_up", flaky)
        turn = session.begin_turn_sync("The boat is called Marlinspike.")
        failing["on"] = True
        turn.complete_sync("A fine name.")  # its background indexing fails, quietly
        run_sync(recall.aclose())  # wakes the background indexing and waits for it
        assert failing["raised"] == 1
        hits = recall.turns(session, "what is the boat called?")
        assert any("Marlinspike" in h.text for h in hits)


def test_index_all_indexes_a_bulk_loaded_session_in_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_module, "BULK_STEP", 7)  # several slices, context across them
    db = tmp_path / "kx.db"
    with Kairox.open(db, config(recall=False)) as kx:
        sid = kx.session().id
        events = []
        for i in range(20):
            events.append(UserMessageAdded(session_id=sid, turn_id=f"t{i}", text=f"question {i}"))
            events.append(
                AssistantMessageCompleted(session_id=sid, turn_id=f"t{i}", text=f"answer {i}")
            )
        kx.events_store.append_many(events)
    with Kairox.open(db, config()) as kx:
        session = kx.session(session_id=sid)
        recall = recall_of(kx)
        assert recall.index_all(session) == 40
        assert recall.progress(sid) == (0, kx.events_store.last_seq(sid))
        assert recall.catch_up(session) == 0  # nothing left for the next search
        docs = recall.index(session).documents()
        assert len(docs) == 40
        # every turn but the first is embedded with the one before it, across slices
        rows = recall.index(session).conn.execute(
            "SELECT count(*) FROM rag_chunks WHERE workspace_id = ? AND context != ''",
            (recall.index(session).workspace_id,),
        )
        assert rows.fetchone()[0] == 39


@pytest.fixture
def common_index(tmp_path: Path) -> WorkspaceRagIndex:
    index = WorkspaceRagIndex(tmp_path / "kx.db", "ws", HashingEmbedding(32))
    docs = [(f"d{i}", f"the project meeting notes number {i}") for i in range(40)]
    docs.append(("rare", "the walrus project"))
    for doc_id, text in docs:
        index.add_text(doc_id, text)
    return index


def test_a_small_index_searches_every_word(common_index: WorkspaceRagIndex) -> None:
    words = query_terms("the walrus project meeting notes")
    assert common_index._keyword_terms("the walrus project meeting notes") == words
    selector = common_index._term_selector
    assert selector is not None and len(selector._counts) == 0  # fewer rows than CHEAP_ROWS:
    # no term can be in more, so none is counted


def test_a_mid_sized_index_drops_weightless_words_of_short_doclists(
    common_index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every doclist here is short (under ``CHEAP_ROWS``), but the index has more rows
    than ``WEIGHTLESS_ROWS``: the words in every row rank nothing and are not read."""
    monkeypatch.setattr(keyword_terms, "WEIGHTLESS_ROWS", 10)
    assert common_index._keyword_terms("the walrus project meeting notes") == ["walrus"]
    assert common_index.search("the walrus project", 1, "keyword")[0].doc_id == "rare"


def test_weightless_long_doclists_are_skipped_rare_words_kept(
    common_index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 5)  # every doclist here is "long"
    # "the" and "project" are in every row (weightless), "walrus" in one, "zebra" in none
    assert common_index._keyword_terms("the walrus project zebra") == ["walrus", "zebra"]
    hits = common_index.search("the walrus project", 3, "keyword")
    assert hits[0].doc_id == "rare"
    # a word counted when absent is counted again: the next document may bring it
    common_index.add_text("z", "a zebra crossing")
    assert common_index.search("the zebra project", 1, "keyword")[0].doc_id == "z"


def test_a_long_prompt_keeps_its_rarest_terms(
    common_index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 0)
    monkeypatch.setattr(keyword_terms, "MAX_TERMS", 2)
    for i in range(3):
        common_index.add_text(f"x{i}", "kiwi kiwi" if i else "kiwi mango papaya")
    # rows: 44; mango and papaya in 1, kiwi in 3, meeting in 40 (weightless)
    assert common_index._keyword_terms("kiwi meeting mango papaya") == ["mango", "papaya"]


def test_full_term_caches_start_over_without_losing_a_query_s_terms(
    common_index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server meets new words every turn: the word caches start over once full, and a
    query whose other words were cached when one new word overflowed them still gets
    every term (they were cleared after the lookup: a KeyError, 500 in ``serve``)."""
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 5)  # every word counted: both caches
    monkeypatch.setattr(keyword_terms, "_CACHE_LIMIT", 3)
    assert common_index._keyword_terms("the walrus project zebra") == ["walrus", "zebra"]
    for i in range(6):  # one new word each time, the cached ones again beside it
        kept = common_index._keyword_terms(f"the walrus project zebra word{i}")
        assert kept == ["walrus", "zebra", f"word{i}"]
    selector = common_index._term_selector
    assert selector is not None
    assert len(selector._stems) <= 3 + 5 and len(selector._counts) <= 3 + 5


def test_term_caches_keep_the_words_in_use_and_drop_one_off_words(
    common_index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's prompts bring a new word each (a number): the word caches held them
    until 4,096 and started over (issue 27: ~180 bytes a word, most of the slope of
    serve's memory up to ~4,000 turns). A word no query asks for goes after
    ``_CACHE_LOOKUPS`` lookups; the words queries keep asking for stay."""
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 5)  # every word counted: both caches
    monkeypatch.setattr(keyword_terms, "_CACHE_LOOKUPS", 40)
    for i in range(200):
        kept = common_index._keyword_terms(f"the walrus project zebra number{i}")
        assert kept == ["walrus", "zebra", f"number{i}"]
    selector = common_index._term_selector
    assert selector is not None
    words = selector._stems
    assert len(words) <= 4 + 2 * (40 // 5 + 1)
    assert "walrus" in words and "zebra" in words
    assert "number0" not in words and "number100" not in words
    stems = {w: s[0] for w, s in selector._stems_of(["walrus", "zebra", "number0"]).items()}
    counts = selector._counts
    assert len(counts) <= 4 + 2 * (40 // 5 + 1)
    assert stems["walrus"] in counts and stems["zebra"] in counts
    assert stems["number0"] not in counts


def _vocabulary_reads(index: WorkspaceRagIndex, query: str) -> tuple[list[str], int]:
    """The terms ``query`` keeps, and how many statements read the FTS vocabulary's row
    counts (the live count of a doclist) to choose them."""
    seen: list[str] = []
    index.conn.set_trace_callback(seen.append)
    try:
        kept = index._keyword_terms(query)
    finally:
        index.conn.set_trace_callback(None)
    return kept, sum(q.startswith("SELECT") and "kx_rag_fts_rows" in q for q in seen)


def test_stored_term_counts_choose_what_live_counts_choose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bulk and background indexing store the common terms' counts (keyword_terms.py):
    a new connection then chooses the same terms without counting a doclist, until the
    index has grown by a quarter, when it counts live again (and the next refresh
    stores them again)."""
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 5)
    db = tmp_path / "kx.db"
    index = WorkspaceRagIndex(db, "ws", HashingEmbedding(32))
    for i in range(40):
        index.add_text(f"d{i}", f"the project meeting notes number {i}" + " budget" * (i % 4 == 0))
    index.add_text("rare", "the walrus project")
    query = "the walrus budget project zebra meeting"
    live, reads = _vocabulary_reads(index, query)
    assert reads == 1 and live == ["walrus", "budget", "zebra"]  # the, project, meeting:
    # weightless (in every row)
    assert index.refresh_term_stats() is True
    assert index.refresh_term_stats() is False  # fresh: nothing to do
    index.close()

    again = WorkspaceRagIndex(db, "ws", HashingEmbedding(32))
    assert _vocabulary_reads(again, query) == (live, 0)  # from rag_term_stats
    for i in range(15):  # 41 rows -> 56: more than a quarter
        again.add_text(f"e{i}", f"zebra crossing {i}")
    kept, reads = _vocabulary_reads(again, query)
    assert reads == 1 and "zebra" in kept  # stale: counted live
    assert again.refresh_term_stats() is True
    assert _vocabulary_reads(again, "zebra walrus") == (["zebra", "walrus"], 0)
    again.close()


def test_term_counts_are_not_stored_for_a_small_index(common_index: WorkspaceRagIndex) -> None:
    """Fewer rows than ``CHEAP_ROWS``: no term can be costly, nothing is stored."""
    assert common_index.refresh_term_stats() is False
    rows = common_index.conn.execute("SELECT count(*) FROM rag_term_stats_meta").fetchone()
    assert rows[0] == 0


def test_counts_stored_under_another_threshold_are_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 5)
    index = WorkspaceRagIndex(tmp_path / "kx.db", "ws", HashingEmbedding(32))
    for i in range(12):
        index.add_text(f"d{i}", f"the project notes {i}")
    assert index.refresh_term_stats() is True
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 8)
    assert _vocabulary_reads(index, "the notes walrus")[1] == 1  # counted live
    assert index.refresh_term_stats() is True  # and stored again under the new threshold
    assert _vocabulary_reads(index, "the notes kiwi")[1] == 0
    index.close()


_WORDS = ("apple", "banana", "cherry", "damson", "elder", "fig", "grape", "kiwi")


@pytest.mark.slow
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5), min_size=8, max_size=40
    ),
    queries=st.lists(st.lists(st.sampled_from(_WORDS), min_size=2, max_size=8), max_size=5),
)
def test_stored_counts_choose_as_live_counts_on_any_index(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    docs: list[list[str]],
    queries: list[list[str]],
) -> None:
    """Right after a refresh, the terms a query keeps from the stored counts are the
    ones live counting keeps, whatever the documents and the query."""
    monkeypatch.setattr(keyword_terms, "CHEAP_ROWS", 3)
    monkeypatch.setattr(keyword_terms, "MAX_TERMS", 3)
    db = tmp_path_factory.mktemp("stats") / "kx.db"
    index = WorkspaceRagIndex(db, "ws", HashingEmbedding(16))
    index.add_documents(
        [DocumentInput(doc_id=f"d{i}", text=" ".join(words)) for i, words in enumerate(docs)]
    )
    live = [index._keyword_terms(" ".join(q)) for q in queries]
    index.refresh_term_stats(force=True)
    index.close()
    again = WorkspaceRagIndex(db, "ws", HashingEmbedding(16))
    assert [_vocabulary_reads(again, " ".join(q)) for q in queries] == [(k, 0) for k in live]
    again.close()
