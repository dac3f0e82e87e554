"""A large text is token-counted once per process (issue 13, item 3: a 10 MB reply was
encoded four times: counted when stored, then counted and cut again when indexed)."""

from __future__ import annotations

import pytest
import tiktoken

from kairox_core.retrieval.chunking import Chunker
from kairox_core.tokens import LARGE_TEXT, TokenCounter


@pytest.fixture
def large_encodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    encode = tiktoken.Encoding.encode

    def counting(self: tiktoken.Encoding, text: str, *a: object, **kw: object) -> list[int]:
        if len(text) >= LARGE_TEXT:
            calls.append(len(text))
        return encode(self, text, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(tiktoken.Encoding, "encode", counting)
    return calls


def test_counting_then_chunking_a_large_text_encodes_it_once(large_encodes: list[int]) -> None:
    text = "unclosedmarkerbody" * (LARGE_TEXT // 6)  # one sentence, one block: cut by tokens
    n = TokenCounter().count(text)
    assert TokenCounter().count(text) == n  # another counter, same process
    chunks = Chunker(max_tokens=256, overlap=16, counter=TokenCounter()).chunk(text)
    assert len(chunks) > 1 and all(c.tokens <= 256 for c in chunks)
    assert large_encodes == [len(text)]
    assert TokenCounter().encode(text) == TokenCounter("o200k_base")._encoding.encode(text)


def test_small_texts_are_not_kept(large_encodes: list[int]) -> None:
    assert TokenCounter().count("hello world") == 2
    assert large_encodes == []
