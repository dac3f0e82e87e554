"""``UseCache`` and the text caches built on it: bounded by entries and weight, and
what no lookup asks for any more goes (issue 27: serve's memory over a long session)."""

from __future__ import annotations

from kairox_core.context.recalled import _neutral_line, counted_line
from kairox_core.markers.taint import _GRAMS, is_tainted
from kairox_core.recall.engine import _redacted
from kairox_core.redaction import redact
from kairox_core.retrieval.chunking import Chunker
from kairox_core.usecache import UseCache


def test_bounded_by_entries_and_weight() -> None:
    cache: UseCache[str, int] = UseCache(size=8, weight=1000, lookups=10**9)
    for i in range(100):
        cache.put(f"k{i}", i, 10)
    assert len(cache) <= 8
    heavy: UseCache[str, int] = UseCache(size=10**6, weight=1000, lookups=10**9)
    for i in range(100):
        heavy.put(f"k{i}", i, 100)
    assert heavy.weight <= 1000 and len(heavy) <= 10
    heavy.put("big", 0, 501)  # over half the weight: not kept
    assert "big" not in heavy


def test_an_entry_in_use_stays_and_one_out_of_use_goes() -> None:
    cache: UseCache[str, int] = UseCache(size=10**6, weight=10**9, lookups=100)
    cache.put("hot", 1, 1)
    cache.put("cold", 2, 1)
    for i in range(1000):
        assert cache.get("hot") == 1
        cache.put(f"new {i}", i, 1)  # a new text each "turn", never asked for again
    assert "cold" not in cache
    assert "new 0" not in cache
    assert cache.get("hot") == 1
    assert len(cache) <= 1 + 2 * 100


def test_a_put_replaces_the_old_weight() -> None:
    cache: UseCache[str, int] = UseCache(size=100, weight=1000, lookups=10**9)
    cache.put("a", 1, 300)
    cache.put("a", 2, 100)
    assert cache.weight == 100 and cache.get("a") == 2


def test_memoised_functions_give_the_function_s_result_and_stay_bounded() -> None:
    # a long session: every turn brings a new text; the caches do not keep them all
    for i in range(20_000):
        text = f"turn {i}: mail me at a{i}@example.com about row {i % 7}"
        assert _redacted(text) == redact(text)
        assert _neutral_line(text) == counted_line(text)
    assert len(_redacted.cache) <= 1024  # type: ignore[attr-defined]
    assert len(_neutral_line.cache) <= 8192  # type: ignore[attr-defined]
    assert "turn 0: mail me at a0@example.com about row 0" not in _redacted.cache  # type: ignore[attr-defined]


def test_taint_s_gram_cache_is_bounded_by_weight() -> None:
    long_result = " ".join(f"word{i}" for i in range(20_000))  # a long tool result
    for i in range(60):
        assert is_tainted(f"word{i} word{i + 1} word{i + 2} word{i + 3}", [f"{i} {long_result}"])
    assert _GRAMS.weight <= 8_000_000
    # other tests' small entries may still be held; of these 60 long ones only a few
    kept = [key for key in (*_GRAMS.newer, *_GRAMS.older) if key[0].endswith("word19999")]
    assert len(kept) < 10


def test_redaction_s_cache_keeps_recalled_turns_and_drops_serve_s_one_off_prompts() -> None:
    """``serve`` redacts ~4 texts a turn when it indexes one, one of them new (the
    prompt); the old cap turned over only every 8,192 lookups: every prompt stayed
    ~2,000 turns (issue 27). The turns recall brings back every turn stay."""
    recalled = [f"recalled turn {i}: the fence gets the afternoon sun" for i in range(32)]
    for turn in range(3000):
        for text in recalled[turn % 8 :: 8]:  # 4 a turn, each back every 2nd turn
            _redacted(text)
        _redacted(f"turn {turn}: what about the roses in week {turn // 7}?")
    cache = _redacted.cache  # type: ignore[attr-defined]
    assert len(cache) <= 2 * 1024
    assert "turn 0: what about the roses in week 0?" not in cache
    assert "turn 1000: what about the roses in week 142?" not in cache
    assert all(text in cache for text in recalled)


def test_the_chunker_s_counter_keeps_a_document_s_pieces_not_every_document() -> None:
    """Recall chunks each finished turn once; its pieces are counted again only while
    that document is chunked. The chunker's own counter had the token counter's
    default cache: every indexed turn's text stayed for thousands of turns."""
    chunker = Chunker(64, 8)
    long_doc = " ".join(f"Sentence {i} is about the garden." for i in range(300))
    first = chunker.chunk(long_doc)
    for i in range(3000):
        chunker.chunk(f"turn {i}: what should I do about the roses in week {i // 7}?")
    cache = chunker.counter._cache
    assert len(cache) <= 1024
    assert "turn 0: what should I do about the roses in week 0?" not in cache
    assert Chunker(64, 8).chunk(long_doc) == first == chunker.chunk(long_doc)
