"""The shortcuts a turn takes (issue 18 item 3) give the answers of the long way: the
taint check's cached folds and ASCII pre-check, reused source threads, an empty
space's search."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.markers import taint
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import IndexBackendMismatch, WorkspaceRagIndex
from kairox_core.retrieval.threads import run_blocking
from kairox_core.textfold import fold

_WORD = re.compile(r"\w+")


def reference_is_tainted(
    body: str, texts: list[str], ngram: int = 5, threshold: float = 0.6
) -> bool:
    """The check as it was written before caching (the specification)."""

    def toks(t: str) -> list[str]:
        return _WORD.findall(fold(t))

    words = toks(body)
    if not words:
        return False
    if len(words) < ngram:
        needle = " " + " ".join(words) + " "
        return any(needle in " " + " ".join(toks(t)) + " " for t in texts if t)
    grams = {tuple(words[i : i + ngram]) for i in range(len(words) - ngram + 1)}
    seen: set[tuple[str, ...]] = set()
    for t in texts:
        if not t:
            continue
        ts = toks(t)
        seen |= {tuple(ts[i : i + ngram]) for i in range(len(ts) - ngram + 1)} & grams
        if len(seen) >= threshold * len(grams):
            return True
    return False


words = st.sampled_from(["admin", "Password", "is", "hunter2", "ПАРОЛЬ", "раss", "ＡＢＣ", "x"])
texts = st.lists(words, max_size=14).map(" ".join) | st.text(max_size=40)


@pytest.mark.slow
@given(body=texts, untrusted=st.lists(texts, max_size=4))
def test_the_cached_taint_check_agrees_with_the_reference(body: str, untrusted: list[str]) -> None:
    assert taint.is_tainted(body, untrusted) == reference_is_tainted(body, untrusted)


@pytest.mark.slow
@given(body=st.lists(words, min_size=1, max_size=3).map(" ".join), text=texts)
def test_a_short_body_copied_from_a_text_is_found_either_way(body: str, text: str) -> None:
    """The ASCII pre-check rejects only what folding would reject too."""
    assert taint.is_tainted(body, [f"see: {text} {body}!"]) == bool(_WORD.findall(fold(body)))


def test_blocking_calls_reuse_their_threads_and_a_hung_one_does_not_hold_the_next() -> None:
    entered, release = threading.Event(), threading.Event()

    def hang() -> None:
        entered.set()
        release.wait(30)

    async def drive() -> tuple[int, int, int]:
        first = await run_blocking(threading.get_ident)
        second = await run_blocking(threading.get_ident)
        hung = asyncio.ensure_future(run_blocking(hang))
        await asyncio.to_thread(entered.wait)  # the hung call holds its thread now
        third = await run_blocking(threading.get_ident)
        release.set()
        await hung
        return first, second, third

    first, second, third = asyncio.run(drive())
    assert first == second  # the idle thread took the next call
    assert third != first  # that thread is the hung call's: the next one got another


def test_a_hung_call_is_abandoned_on_timeout() -> None:
    release, returned = threading.Event(), threading.Event()

    def hang() -> None:
        release.wait(60)
        returned.set()

    async def drive() -> bool:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(run_blocking(hang), 0.1)
        return returned.is_set()

    try:
        assert asyncio.run(drive()) is False  # the caller went on while the call hung
    finally:
        release.set()


def test_an_empty_space_finds_nothing_and_a_mismatch_still_raises(tmp_path: Path) -> None:
    db = tmp_path / "kx.db"
    index = WorkspaceRagIndex(db, "w", HashingEmbedding(64))
    assert index.search("anything", 5) == []
    index.add_text("a", "the blue flowerpot")
    assert index.search("flowerpot", 5)[0].doc_id == "a"
    index.delete("a")
    assert index.search("flowerpot", 5) == []
    index.close()
    other = WorkspaceRagIndex(db, "w", HashingEmbedding(32))
    with pytest.raises(IndexBackendMismatch):
        other.search("flowerpot", 5)
    other.close()
