"""LlamaIndex's token counter, from Kairox's offline tiktoken files.

LlamaIndex counts tokens (``ChatMemoryBuffer``, ``Memory``, text splitters) with
``tiktoken.encoding_for_model("gpt-3.5-turbo")``, read from a cache it ships, unless
``TIKTOKEN_CACHE_DIR`` is set: then tiktoken looks there and downloads on a miss, which
fails offline. Kairox seeds tiktoken's cache from the ``bpe-openai`` package instead
(``kairox_core.tokens.get_encoding``); the same encoding (cl100k_base, special tokens
allowed, as LlamaIndex asks) becomes LlamaIndex's global tokenizer when none is set,
so nothing in LlamaIndex reaches for the network.
"""

from __future__ import annotations

from functools import partial

import llama_index.core
from llama_index.core.utils import set_global_tokenizer

from kairox_core import get_encoding

LLAMAINDEX_ENCODING = "cl100k_base"  # what encoding_for_model("gpt-3.5-turbo") names


def use_offline_tokenizer() -> None:
    """Give LlamaIndex Kairox's offline cl100k_base, unless it already has a tokenizer."""
    if llama_index.core.global_tokenizer is not None:
        return
    encoding = get_encoding(LLAMAINDEX_ENCODING)
    set_global_tokenizer(partial(encoding.encode, allowed_special="all"))
