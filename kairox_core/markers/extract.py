"""Whole-text extraction: a fast search for the few places that matter.

Fast searches (a compiled regex with a literal prefix, ``str.find``) find the only
places that need Python: a ``<memory`` tag start, and three backticks or tildes (a
possible fence). Everything between them is skipped at search speed.

Code rules (CommonMark-like; each is decided by the end of the line):
* a run of 3+ backticks or tildes at the start of a line (after spaces/tabs) opens a
  fence (a backtick fence's info string has no backtick); it closes at a line holding
  only 3+ of the same character, at least as many as the opener; else at the end;
* any other backtick run opens an inline span closed by the next run of exactly the
  same length on the same line; with no such run it is literal text. Only the line of
  a tag start is examined for spans, and only when a tag start is found.
"""

from __future__ import annotations

import re

from kairox_core.markers._cleanup import Cleaner
from kairox_core.markers._code import fence_closing, fence_opens, span_end
from kairox_core.markers._grammar import (
    CANDIDATE,
    CLOSER,
    DEFAULT_MAX_BODY_CHARS,
    OPEN_TAG,
    TAG_WS,
    InvalidMarker,
    InvalidReason,
    MarkerExtraction,
    MemoryMarker,
    build_element,
    check_limit,
)

_BT3 = re.compile("```")
_TL3 = re.compile("~~~")


def extract_memory_markers(
    text: str, *, max_body_chars: int = DEFAULT_MAX_BODY_CHARS
) -> MarkerExtraction:
    """Split a whole model response into visible text and ``<memory>`` markers.

    Every complete element is removed (valid ones to ``.markers``, the rest to
    ``.invalid``); an opening tag never closed is left in the text and reported
    ``unterminated``. Text in fenced code blocks and inline code is never parsed.
    """
    check_limit(max_body_chars)
    if "<" not in text:  # no tag can start: nothing to do
        return MarkerExtraction(text, [], [])
    cleaner = Cleaner()
    markers: list[MemoryMarker] = []
    invalid: list[InvalidMarker] = []
    cand = CANDIDATE.search
    n = len(text)
    done = 0  # text before this has gone to the cleaner
    pos = 0  # inline code spans are paired from here (after the last element or fence)
    q = 0  # next place to look
    next_tag = next_bt = next_tl = -1  # cached next event of each kind (-1: look again)
    if "~" not in text:  # one memchr instead of a search that finds nothing
        next_tl = n
    while True:
        if next_tag < q:
            m = cand(text, q)
            next_tag = m.start() if m is not None else n
        if next_bt < q:
            m = _BT3.search(text, q)  # a literal-prefix regex search beats str.find here
            next_bt = m.start() if m is not None else n
        if next_tl < q:
            m = _TL3.search(text, q)
            next_tl = m.start() if m is not None else n
        i = min(next_tag, next_bt, next_tl)
        if i >= n:
            break
        if i != next_tag:
            run_end = fence_opens(text, i, True, True)
            if run_end < 0:  # not a fence: its backticks may still pair on the line
                q = i + 3
                continue
            q = pos = fence_closing(text, text[i], run_end - i, run_end)
            continue
        line_end = text.find("\n", i)
        if line_end < 0:
            line_end = n
        start = max(pos, text.rfind("\n", 0, i) + 1)
        covered = span_end(text, start, i, line_end, True) if "`" in text[start:i] else 0
        if covered > 0:  # the tag is inside an inline code span
            q = pos = covered
            continue
        if i > done:
            cleaner.text(text[done:i])
        tag = OPEN_TAG.match(text, i)
        if tag is None:  # never closed by '>': the rest of the text is released
            raw = text[i:]
            cleaner.text(raw)
            invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, raw,
                                         "the opening tag is never closed by '>'"))
            done = n
            break
        attrs = tag.group(1)
        end = tag.end()
        if attrs.rstrip(TAG_WS).endswith("/"):
            result = build_element(text[i:end], attrs, None, max_body_chars)
        else:
            closer = CLOSER.search(text, end)
            if closer is None:  # an opening tag never closed
                raw = text[i:end]
                cleaner.text(raw)
                invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, raw,
                                             "no </memory> closes this tag"))
                done = q = pos = end
                continue
            result = build_element(text[i:closer.end()], attrs,
                                   text[end:closer.start()], max_body_chars)
            end = closer.end()
        if isinstance(result, MemoryMarker):
            markers.append(result)
        else:
            invalid.append(result)
        cleaner.marker()
        done = q = pos = end
    if done < n:
        cleaner.text(text[done:])
    return MarkerExtraction(cleaner.eof(), markers, invalid)
