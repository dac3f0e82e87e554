"""Token counting: exact, offline, with OpenAI's chat accounting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.tokens import (
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TokenCounter,
    encoding_for_model,
    get_encoding,
)

NO_NETWORK = textwrap.dedent(
    """
    import socket
    def _refuse(*a, **k):
        raise OSError("network is unreachable (test)")
    socket.socket.connect = _refuse
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(("encoding", "expected"), [("cl100k_base", 6), ("o200k_base", 6)])
def test_counts_with_the_network_unreachable(tmp_path: Path, encoding: str, expected: int) -> None:
    # A fresh, empty tiktoken cache and no sockets: only the installed package can help.
    script = NO_NETWORK + textwrap.dedent(
        f"""
        from kairox_core.tokens import TokenCounter
        print(TokenCounter({encoding!r}).count("tiktoken is great!"))
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(expected)


@pytest.mark.slow
def test_disabled_tiktoken_cache_still_works(tmp_path: Path) -> None:
    script = (
        NO_NETWORK + "from kairox_core.tokens import TokenCounter\n"
        "print(TokenCounter('cl100k_base').count('tiktoken is great!'))"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": "", "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "6"


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("llama3", None),
        ("claude-3-opus", None),
    ],
)
def test_model_to_encoding(model: str, encoding: str | None) -> None:
    assert encoding_for_model(model) == encoding


def test_unknown_model_gets_a_safety_margin() -> None:
    known = TokenCounter.for_model("gpt-4o")
    assert known.margin == 0 and known.encoding_name == "o200k_base"
    unknown = TokenCounter.for_model("mistral-large", unknown_margin=0.10)
    assert unknown.margin == pytest.approx(0.10)
    text = "word " * 1000
    base = TokenCounter("o200k_base").count(text)
    assert unknown.count(text) == -(-base * 110 // 100)
    assert TokenCounter.for_model("mistral", unknown_margin=0.25).count(text) > unknown.count(text)


def test_message_overhead_follows_openai_accounting() -> None:
    counter = TokenCounter("o200k_base")
    enc = get_encoding("o200k_base")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there", "name": "ann"},
    ]
    expected = REPLY_PRIMING_TOKENS
    for m in messages:
        expected += TOKENS_PER_MESSAGE + sum(len(enc.encode(v)) for v in m.values())
        expected += 1 if "name" in m else 0
    assert counter.count_messages(messages) == expected
    assert counter.count_messages([]) == REPLY_PRIMING_TOKENS


def test_special_token_lookalikes_are_counted_as_text() -> None:
    counter = TokenCounter("cl100k_base")
    assert counter.count("<|endoftext|>") > 1


def test_cache_returns_same_count_and_is_bounded() -> None:
    counter = TokenCounter("cl100k_base", cache_size=4)
    texts = [f"text number {i}" for i in range(10)]
    first = [counter.count(t) for t in texts]
    assert [counter.count(t) for t in texts] == first
    assert len(counter._cache) <= 4


def test_cache_keeps_what_turns_count_and_drops_what_they_stopped_counting() -> None:
    """A long-running server: every turn counts its window again plus one new prompt.
    The cache holds the window and the recent prompts, not every prompt ever seen
    (issue 27: the old cache kept 65,536 of them)."""
    counter = TokenCounter("o200k_base", cache_lookups=1000)
    window = [f"window line {i} about the garden" for i in range(50)]
    for turn in range(5000):
        for text in window:
            counter.count(text)
        counter.count(f"turn {turn}: what about the roses in week {turn // 7}?")
    per_turn = len(window) + 1
    assert len(counter._cache) <= len(window) + 2 * (1000 // per_turn + 1)
    assert all(text in counter._cache for text in window)
    assert "turn 4999: what about the roses in week 714?" in counter._cache
    assert "turn 0: what about the roses in week 0?" not in counter._cache


def test_a_counter_asked_for_few_texts_a_turn_still_drops_old_prompts() -> None:
    """``serve``'s profile counter: ~8 texts a turn, one new (the prompt). Turned over
    by 65,536 lookups, every prompt stayed ~16,000 turns: one entry (~185 bytes) a
    turn for a 10,000-turn run (issue 27); with the default now, a few hundred."""
    counter = TokenCounter("o200k_base")
    window = [f"system line {i}" for i in range(7)]
    for turn in range(3000):
        for text in window:
            counter.count(text)
        counter.count(f"turn {turn}: what about the roses in week {turn // 7}?")
    assert len(counter._cache) <= len(window) + 2 * (4096 // 8 + 1)
    assert all(text in counter._cache for text in window)
    assert "turn 1000: what about the roses in week 142?" not in counter._cache


def test_cache_is_bounded_by_characters() -> None:
    counter = TokenCounter("o200k_base", cache_chars=1000)
    for i in range(100):
        counter.count(f"{i:03d} " + "x" * 96)  # 100 characters each
    assert counter._cache.weight <= 1000
    assert 5 <= len(counter._cache) <= 10
    counter.count("y" * 600)  # over half the budget: counted, not kept
    assert "y" * 600 not in counter._cache
    assert counter.count("y" * 600) == len(get_encoding("o200k_base").encode("y" * 600))


def test_unknown_encoding_is_a_user_error() -> None:
    from kairox_core.errors import KairoxUserError

    with pytest.raises(KairoxUserError, match="unknown token encoding 'p99k'"):
        TokenCounter("p99k")


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["cl100k_base", "o200k_base"]))
def test_count_equals_tiktoken(text: str, encoding: str) -> None:
    enc: tiktoken.Encoding = get_encoding(encoding)
    assert TokenCounter(encoding).count(text) == len(enc.encode(text, disallowed_special=()))
