"""Token-bounded chunking that follows Markdown structure.

Text is split into blocks (headings, paragraphs, fenced code blocks); blocks are
packed greedily into chunks of at most ``max_tokens``. A heading starts a new chunk
once the current one is reasonably full, a fenced block is never cut unless it alone
is larger than a chunk, and consecutive chunks overlap by whole trailing sentences
or lines (never half a code fence) up to ``overlap`` tokens.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from kairox_core.tokens import TokenCounter

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass(frozen=True)
class Block:
    text: str
    kind: str  # "heading" | "paragraph" | "code"
    heading: str  # the heading path in force, " > " joined


@dataclass(frozen=True)
class Chunk:
    text: str
    tokens: int
    heading: str
    content_hash: str


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def split_blocks(text: str) -> list[Block]:
    """Headings, paragraphs and fenced code blocks, in order."""
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []
    para: list[str] = []
    lines = text.splitlines()

    def heading() -> str:
        return " > ".join(t for _, t in path)

    def flush_para() -> None:
        if para:
            body = "\n".join(para).strip()
            if body:
                blocks.append(Block(body, "paragraph", heading()))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            marker = fence.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(marker):
                j += 1
            blocks.append(Block("\n".join(lines[i : j + 1]), "code", heading()))
            i = j + 1
            continue
        head = _HEADING.match(line)
        if head:
            flush_para()
            level = len(head.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, head.group(2)))
            blocks.append(Block(line.strip(), "heading", heading()))
        elif not line.strip():
            flush_para()
        else:
            para.append(line)
        i += 1
    flush_para()
    return blocks


class Chunker:
    """Splits text into chunks of at most ``max_tokens`` with ``overlap`` tokens carried."""

    def __init__(
        self, max_tokens: int = 512, overlap: int = 64, counter: TokenCounter | None = None
    ) -> None:
        if max_tokens < 16:
            raise ValueError("max_tokens must be >= 16")
        if not 0 <= overlap < max_tokens // 2:
            raise ValueError("overlap must be >= 0 and below half of max_tokens")
        self.max_tokens = max_tokens
        self.overlap = overlap
        # a piece is counted again only while its document is chunked (a chunk's worth
        # of lookups later): a small cache, so an indexed turn's text goes soon after
        self.counter = counter or TokenCounter(
            cache_size=1024, cache_chars=256_000, cache_lookups=1024
        )

    def _pieces(self, block: Block) -> list[str]:
        """A block cut into parts that each fit; only blocks larger than a chunk are cut."""
        if self.counter.count(block.text) <= self.max_tokens - 2:
            return [block.text]
        limit = self.max_tokens - self.overlap - 4  # room for the carried overlap
        units = block.text.split("\n") if block.kind == "code" else _SENTENCE.split(block.text)
        sep = "\n" if block.kind == "code" else " "
        pieces: list[str] = []
        current: list[str] = []
        size = 0
        for unit in units:
            n = self.counter.count(unit) + 1
            if n > limit:  # one enormous sentence or line: cut by tokens
                if current:
                    pieces.append(sep.join(current))
                    current, size = [], 0
                pieces.extend(self._hard_split(unit))
                continue
            if size + n > limit and current:
                pieces.append(sep.join(current))
                current, size = [], 0
            current.append(unit)
            size += n
        if current:
            pieces.append(sep.join(current))
        return pieces

    def _hard_split(self, text: str) -> list[str]:
        enc = self.counter._encoding
        ids = self.counter.encode(text)  # not encoded again when just counted
        step = self.max_tokens - self.overlap - 8
        return [enc.decode(ids[i : i + step]) for i in range(0, len(ids), step)]

    def _tail(self, parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Trailing whole units of the chunk just closed, up to ``overlap`` tokens."""
        if not self.overlap:
            return []
        carried: list[tuple[str, str]] = []
        budget = self.overlap
        for text, kind in reversed(parts):
            if kind == "code":
                break
            n = self.counter.count(text)
            if n <= budget:
                carried.insert(0, (text, kind))
                budget -= n
                continue
            sentences = _SENTENCE.split(text)
            tail: list[str] = []
            for sentence in reversed(sentences):
                m = self.counter.count(sentence) + 1
                if m > budget:
                    break
                tail.insert(0, sentence)
                budget -= m
            if tail:
                carried.insert(0, (" ".join(tail), "paragraph"))
            break
        return carried

    def chunk(self, text: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        parts: list[tuple[str, str]] = []
        size = 0
        fresh = 0  # tokens not carried over from the previous chunk
        chunk_heading = ""

        def emit(carry: bool) -> None:
            nonlocal parts, size, fresh
            if fresh == 0:
                return
            body = "\n\n".join(t for t, _ in parts)
            chunks.append(Chunk(body, self.counter.count(body), chunk_heading, content_hash(body)))
            parts = self._tail(parts) if carry else []
            size = sum(self.counter.count(t) + 2 for t, _ in parts)
            fresh = 0

        for block in split_blocks(text):
            if block.kind == "heading" and fresh >= self.max_tokens // 4:
                emit(carry=False)
            for piece in self._pieces(block):
                n = self.counter.count(piece) + 2
                if size + n > self.max_tokens and fresh:
                    emit(carry=True)
                    while parts and size + n > self.max_tokens:
                        parts.pop(0)
                        size = sum(self.counter.count(t) + 2 for t, _ in parts)
                if fresh == 0 and (not parts or block.kind != "heading"):
                    chunk_heading = block.heading
                parts.append((piece, block.kind))
                size += n
                fresh += n
        emit(carry=False)
        return chunks
