"""Exact, offline token counting with tiktoken.

tiktoken downloads its encodings on first use, which fails on a machine without
network. The ``bpe-openai`` package ships the same files; we seed tiktoken's cache
with them so ``tiktoken.get_encoding`` works offline and still checks its hashes.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

import tiktoken

from kairox_core.errors import KairoxUserError
from kairox_core.usecache import UseCache

ENCODING_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
DEFAULT_ENCODING = "o200k_base"
DEFAULT_UNKNOWN_MODEL_MARGIN = 0.10

# OpenAI's documented accounting for chat messages (openai-cookbook, "How to count
# tokens with tiktoken"): every message costs 3 tokens of framing, a name 1 more,
# and every reply is primed with 3.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
# An image sent as a content part (a vision profile's new prompt), counted as the most
# OpenAI charges one at high detail: 85 + 170 per 512-px tile, and an image scaled to
# fit 2048 px with its short side at 768 px covers at most 8 tiles. An upper bound, so
# a budget that holds the count holds the image.
IMAGE_TOKENS = 85 + 170 * 8

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002")

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}


def _tiktoken_cache_dir() -> str:
    """The directory tiktoken will read, computed exactly as tiktoken.load does."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        if os.environ["TIKTOKEN_CACHE_DIR"]:
            return os.environ["TIKTOKEN_CACHE_DIR"]
        # The user disabled tiktoken's cache; give it a private one of ours instead.
        import platformdirs

        path = os.path.join(platformdirs.user_cache_dir("kairox"), "tiktoken")
        os.environ["TIKTOKEN_CACHE_DIR"] = path
        return path
    if os.environ.get("DATA_GYM_CACHE_DIR"):
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_cache(name: str) -> None:
    url = ENCODING_URLS[name]
    cache_dir = _tiktoken_cache_dir()
    target = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if os.path.exists(target):
        return
    packed = resources.files("bpe_openai").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(gzip.decompress(packed))
    os.replace(tmp, target)  # atomic: a reader never sees half a file


def get_encoding(name: str) -> tiktoken.Encoding:
    """Return a tiktoken encoding without touching the network."""
    with _lock:
        if name in _encodings:
            return _encodings[name]
        if name not in ENCODING_URLS:
            raise KairoxUserError(
                f"unknown token encoding '{name}'; use one of: {', '.join(sorted(ENCODING_URLS))}"
            )
        _seed_cache(name)
        enc = tiktoken.get_encoding(name)
        _encodings[name] = enc
        return enc


def encoding_for_model(model: str | None) -> str | None:
    """Map an OpenAI model name to its encoding; None when the model is not OpenAI's
    (or not named: the provider's own)."""
    if model is None:
        return None
    lowered = model.lower().split("/")[-1]
    if lowered.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if lowered.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return None


# Large texts are encoded once per process, whichever counter asks: a reply is counted
# when it is stored, then chunked when recall indexes it (count, then cut by tokens).
# Kept: the token ids (4 bytes each), by (encoding, text); bounded by total tokens.
LARGE_TEXT = 16384  # characters
_LARGE_BUDGET = 8_000_000  # token ids held at most
_large: OrderedDict[tuple[str, str], array[int]] = OrderedDict()
_large_tokens = 0
_large_lock = threading.Lock()


def _large_ids(encoding: tiktoken.Encoding, name: str, text: str) -> array[int]:
    """The ids of a large ``text``, encoded once (see ``LARGE_TEXT``)."""
    global _large_tokens
    key = (name, text)
    with _large_lock:
        ids = _large.get(key)
        if ids is not None:
            _large.move_to_end(key)
            return ids
    ids = array("I", encoding.encode(text, disallowed_special=()))
    with _large_lock:
        if key not in _large:
            _large[key] = ids
            _large_tokens += len(ids)
            while _large_tokens > _LARGE_BUDGET and len(_large) > 1:
                _, old = _large.popitem(last=False)
                _large_tokens -= len(old)
    return ids


class TokenCounter:
    """Counts tokens exactly as tiktoken does, with a bounded cache keyed by content
    (``UseCache``: what turns keep counting stays, what they stopped counting goes).

    ``margin`` inflates counts (rounding up) for models whose own tokenizer differs
    from the encoding used here, so a budget computed with it stays safe.
    """

    def __init__(
        self,
        encoding: str = DEFAULT_ENCODING,
        *,
        margin: float = 0.0,
        cache_size: int = 16384,
        cache_chars: int = 2_000_000,  # a whole window's texts (a session opened again)
        # A text not counted again in this many lookups goes. A turn of ``serve`` asks
        # a profile's counter for 8-40 texts, one of them new (the prompt): turned
        # over by 65,536 lookups, the prompts stayed 3,000-16,000 turns (~185 bytes
        # each, a slope of ~0.2 MB per 1,000 turns per counter over a 10,000-turn run)
        cache_lookups: int = 4096,
    ) -> None:
        if margin < 0:
            raise ValueError("margin must be >= 0")
        self.encoding_name = encoding
        self.margin = margin
        self._encoding = get_encoding(encoding)
        # by characters held: the texts are the keys
        self._cache: UseCache[str, int] = UseCache(cache_size, cache_chars, cache_lookups)

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        fallback_encoding: str = DEFAULT_ENCODING,
        unknown_margin: float = DEFAULT_UNKNOWN_MODEL_MARGIN,
    ) -> TokenCounter:
        """A counter for ``model``: its own encoding if known, else the fallback plus a margin."""
        known = encoding_for_model(model)
        if known is not None:
            return cls(known)
        return cls(fallback_encoding, margin=unknown_margin)

    def _raw(self, text: str) -> int:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        if len(text) >= LARGE_TEXT:
            n = len(_large_ids(self._encoding, self.encoding_name, text))
        else:
            n = len(self._encoding.encode(text, disallowed_special=()))
        self.remember(text, n)
        return n

    def remember(self, text: str, n: int) -> None:
        """Cache ``n`` as ``text``'s count: one just encoded, or one made earlier for
        this very text under this encoding and stored beside it
        (``ProfileCounter.known_raw_count`` checks both before it calls this)."""
        self._cache.put(text, n, len(text))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token look-alikes as plain text); a large text
        counted before is not encoded again."""
        if len(text) >= LARGE_TEXT:
            return list(_large_ids(self._encoding, self.encoding_name, text))
        return self._encoding.encode(text, disallowed_special=())

    def _scaled(self, n: int) -> int:
        if not self.margin:
            return n
        return -(-n * round((1 + self.margin) * 1000) // 1000)  # ceil, integer-exact

    def count(self, text: str) -> int:
        """Tokens in ``text`` (special-token look-alikes are counted as plain text)."""
        return self._scaled(self._raw(text))

    def message_tokens(self, message: Mapping[str, Any]) -> int:
        """Tokens one chat message costs, framing included, excluding reply priming."""
        n = TOKENS_PER_MESSAGE
        for field, value in message.items():
            if value is None:
                continue
            if field == "content" and isinstance(value, list):
                n += self._content_parts(value)
            else:
                n += self._raw(value if isinstance(value, str) else _as_text(value))
            if field == "name":
                n += TOKENS_PER_NAME
        return self._scaled(n)

    def _content_parts(self, parts: list[Any]) -> int:
        """OpenAI content parts: text parts as their text, each image as
        ``IMAGE_TOKENS`` (not its base64, which the model never reads as text)."""
        n = 0
        for part in parts:
            if isinstance(part, Mapping) and part.get("type") == "image_url":
                n += IMAGE_TOKENS
            elif isinstance(part, Mapping) and part.get("type") == "text":
                n += self._raw(str(part.get("text", "")))
            else:
                n += self._raw(_as_text(part))
        return n

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens a list of chat messages costs, as OpenAI counts a chat request."""
        return sum(self.message_tokens(m) for m in messages) + REPLY_PRIMING_TOKENS


def _as_text(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
