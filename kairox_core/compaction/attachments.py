"""Attachments when context shrinks: images become a marker, long documents a digest.

``UserMessageAdded.attachments`` holds ``{"kind": "image" | "document", "filename": ...,
"text": ...}``. Older turns never carry an image again: history renders it as
``[Image dropped — was: <filename>]`` (see ``image_marker``). When a turn is compacted,
its attachments are folded into the text the strategy reads: images as that marker,
documents verbatim when short, else their synopsis (written when the turn attached
them, synopsis.py) or, for one stored without, summarised text-side (the sentences that
carry names, numbers and dates, in order, within ``[compaction] attachment_max_tokens``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kairox_core.config import KairoxConfig
from kairox_core.context.history import image_marker
from kairox_core.events import Event, UserMessageAdded
from kairox_core.tokens import TokenCounter, get_encoding

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_SIGNAL = re.compile(r"\d|\b[A-Z][a-z]+\b|\b(?:decid|agree|must|todo|deadline)", re.I)


def attachment_name(att: Mapping[str, Any]) -> str:
    return str(att.get("filename") or att.get("name") or "unnamed")


def digest(text: str, max_tokens: int, counter: TokenCounter | None = None) -> str:
    """A text-side summary of a long document: its first sentence, then the sentences
    with the most signal (numbers, names, decisions), in document order, within
    ``max_tokens``. Short texts come back unchanged."""
    counter = counter or TokenCounter()
    text = text.strip()
    if counter.count(text) <= max_tokens:
        return text
    sentences = [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]
    scored = sorted(
        range(len(sentences)), key=lambda i: (i != 0, -len(_SIGNAL.findall(sentences[i])), i)
    )
    chosen: set[int] = set()
    used = 0
    for i in scored:
        n = counter.count(sentences[i]) + 1
        if used + n > max_tokens:
            continue
        chosen.add(i)
        used += n
    kept = [sentences[i] for i in sorted(chosen)]
    if not kept:  # one giant sentence: cut it
        enc = get_encoding(counter.encoding_name)
        kept = [enc.decode(enc.encode(text, disallowed_special=())[:max_tokens])]
    return (
        " ".join(kept) + f" [document summarised: {len(kept)} of {len(sentences)} sentences kept]"
    )


def render_for_summary(
    text: str,
    attachments: Sequence[Mapping[str, Any]],
    max_tokens: int,
    counter: TokenCounter | None = None,
) -> str:
    """A user message's text with its attachments folded in, ready to summarise."""
    parts = [text]
    for att in attachments:
        name = attachment_name(att)
        kind = str(att.get("kind", "document"))
        body = att.get("text")
        synopsis = att.get("synopsis")
        if kind == "image":
            parts.append(image_marker(name))
        elif isinstance(synopsis, str) and synopsis.strip():  # written when attached
            parts.append(f"[{kind} {name}, synopsis]\n{synopsis.strip()}")
        elif isinstance(body, str) and body.strip():
            parts.append(f"[{kind} {name}]\n{digest(body, max_tokens, counter)}")
        else:
            parts.append(f"[{kind} {name}]")
    return "\n\n".join(p for p in parts if p)


_MARKER = re.compile(r"\[Image dropped — was: [^\]\n]*\]")


def image_markers(originals: Sequence[Event], folded_texts: Sequence[str] = ()) -> list[str]:
    """Every image marker the new summary stands for: the originals' images and the
    markers earlier summaries being folded still carry, in order, once each."""
    found: list[str] = []
    for text in folded_texts:
        found += _MARKER.findall(text)
    for event in originals:
        if isinstance(event, UserMessageAdded):
            found += [
                image_marker(attachment_name(a))
                for a in event.attachments
                if a.get("kind") == "image"
            ]
    return list(dict.fromkeys(found))


def keep_image_markers(summary: str, markers: Sequence[str]) -> str:
    """``summary`` with each marker it lost appended on a line of its own: whatever the
    strategy kept or dropped, the model goes on knowing an image was there."""
    missing = [m for m in markers if m not in summary]
    return "\n".join([summary.rstrip(), *missing]) if missing else summary


def prepare_originals(events: Sequence[Event], config: KairoxConfig) -> list[Event]:
    """The originals as a strategy should read them: attachments folded into the text
    (images dropped, long documents digested). The stored events are not touched."""
    counter = TokenCounter()
    limit = config.compaction.attachment_max_tokens
    out: list[Event] = []
    for event in events:
        if isinstance(event, UserMessageAdded) and event.attachments:
            event = dataclasses.replace(
                event,
                text=render_for_summary(event.text, event.attachments, limit, counter),
                attachments=(),
            )
        out.append(event)
    return out
