"""Token counting for a profile, and the arithmetic that makes layer counts exact.

A chat message costs ``scale(3 + tokens(role) + tokens(content) + ...)`` (OpenAI's
framing; ``scale`` applies the profile's margin, rounding up). Block messages are built
from units that each end in a newline and start with ``[`` or ``<``: tiktoken's
pre-tokeniser always splits there, so a block's count is the sum of its units' counts
and a unit is counted once (and cached), not the whole block every turn.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from typing import Any

from kairox_core.config import ProfileConfig
from kairox_core.tokens import (
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TokenCounter,
    encoding_for_model,
)

__all__ = [
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "ProfileCounter",
    "counter_for_profile",
]

_lock = threading.Lock()
# A newline followed by an ASCII letter or digit: no pre-token of tiktoken's (cl100k,
# o200k) runs across it (a newline run, or punctuation and its newlines, stops
# before a letter or digit, and a word's optional leading char is never a newline).
_LINE_START = re.compile(r"(?<=\n)(?=[A-Za-z0-9])")
_counters: dict[tuple[str, float], ProfileCounter] = {}


def _digest(text: str) -> str:
    # not chunking.content_hash: that one is strict UTF-8, while tiktoken counts a text
    # with lone surrogates (from JSON escapes) and so must this
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class ProfileCounter:
    """A ``TokenCounter`` plus a margin-free twin for raw unit counts.

    ``key`` names the counting scheme (encoding and margin); token counts cached in
    events are trusted only when their key matches.
    """

    def __init__(self, encoding: str, margin: float) -> None:
        self.counter = TokenCounter(encoding, margin=margin)
        self.raw = TokenCounter(encoding) if margin else self.counter
        self.encoding = encoding
        self.margin = margin
        self.key = f"{encoding}+{margin:g}"
        self._permille = round((1 + margin) * 1000)
        self._last_lines: tuple[str, int] | None = None

    def scale(self, n: int) -> int:
        """Apply the margin as ``TokenCounter`` does (ceil, integer-exact)."""
        if not self.margin:
            return n
        return -(-n * self._permille // 1000)

    def raw_count(self, text: str) -> int:
        return self.raw.count(text)

    def stamp(self, text: str) -> str:
        """``text``'s raw count, with the encoding and a digest of the text, to store
        beside it (``known_raw_count`` trusts it for that very text and encoding only).
        Not through the cache: indexers call it from worker threads."""
        return f"{self.encoding}:{_digest(text)}:{len(self.raw.encode(text))}"

    def known_raw_count(self, text: str, stamp: object) -> int:
        """``raw_count(text)``, taken from ``stamp`` (what ``stamp(text)`` gave, stored)
        when it was made for this very text under this encoding, else counted. A count
        taken goes into the cache, where ``raw_count_lines`` finds it: recall stores
        each turn's line count when it indexes the turn, so the ~30 lines a turn
        recalls for the first time are not encoded on the turn."""
        if isinstance(stamp, str):
            encoding, _, rest = stamp.partition(":")
            digest, _, n = rest.partition(":")
            known = encoding == self.encoding and n.isascii() and n.isdigit()
            if known and digest == _digest(text):  # the digest last: it is the cost
                self.raw.remember(text, int(n))
                return int(n)
        return self.raw.count(text)

    def raw_count_lines(self, text: str) -> int:
        """``raw_count(text)``, as the sum of its lines' counts (split where a line
        starts with an ASCII letter or digit: tiktoken's pre-tokeniser splits there
        too, so the sum is exact). Each line is cached: a block rebuilt every turn
        from mostly the same lines (the recalled turns) is not encoded whole again."""
        if len(text) < 512:
            return self.raw.count(text)
        last = self._last_lines  # one turn counts its block several times (fit, emit)
        if last is not None and last[0] is text:
            return last[1]
        n = sum(self.raw.count(part) for part in _LINE_START.split(text))
        self._last_lines = (text, n)
        return n

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens one message costs, framing included (``TokenCounter.message_tokens``)."""
        return self.counter.message_tokens(message)

    def block_message(self, role: str, raw_content_tokens: int) -> int:
        """Cost of a ``{"role", "content"}`` message whose content has this raw count."""
        return self.scale(TOKENS_PER_MESSAGE + self.raw_count(role) + raw_content_tokens)

    def count_messages(self, messages: Any) -> int:
        return self.counter.count_messages(messages)


def profile_encoding(profile: ProfileConfig) -> tuple[str, float]:
    """(encoding, margin) for a profile, the same rule ``kairox tokens --profile`` uses:
    an explicit encoding or an OpenAI model's own encoding is exact; any other model is
    counted with o200k_base plus the profile's safety margin."""
    enc = profile.encoding or encoding_for_model(profile.model)
    if enc:
        return enc, 0.0
    return "o200k_base", profile.token_margin


def counter_for_profile(profile: ProfileConfig) -> ProfileCounter:
    """A shared counter per (encoding, margin): its content cache serves every turn."""
    key = profile_encoding(profile)
    with _lock:
        counter = _counters.get(key)
        if counter is None:
            counter = ProfileCounter(*key)
            _counters[key] = counter
        return counter
