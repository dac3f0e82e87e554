"""Whole-text extraction: a fast search for the few places that matter.

Fast searches (a compiled regex with a literal prefix, ``str.find``) find the only
places that need Python: a ``<memory`` tag start, and three backticks or tildes (a
possible fence). Everything between them is skipped at search speed. The tag search
also reads a whole element in the usual spelling (``TAG_OR_ELEMENT``), so a typical
marker costs one search and a few string operations; anything else takes the general
path (``OPEN_TAG``, ``CLOSER``, ``build_element``). The cleaner is given ranges of the
text, so the response is copied once into the output (measured: benchmarks/bench_markers.py).

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
from kairox_core.markers._code import FENCE_OPEN, exact_run, fence_closing, span_end
from kairox_core.markers._grammar import (
    CLOSER,
    DEFAULT_MAX_BODY_CHARS,
    DEFUSE,
    LONE_TAG,
    MAX_TAGS,
    OPEN_TAG,
    SCOPES,
    TAG_OR_ELEMENT,
    TAG_WS,
    InvalidMarker,
    InvalidReason,
    MarkerExtraction,
    MemoryMarker,
    build_element,
    check_cap,
    check_limit,
    decode,
    defuse,
    judge,
    new_marker,
    removed_token,
    tags_spent,
    too_many,
)

# Fences start lines: a search from a newline skips runs inside lines at search speed
# (one Python step per run of three was quadratic-looking on ``x```x```...``).
_BT3 = re.compile(r"\n[ \t]*```")
_TL3 = re.compile(r"\n[ \t]*~~~")
_LEAD = re.compile(r"[ \t]*")
BT_LINE = re.compile(r"[ \t]*```")  # a line that starts like a backtick fence
_SINGLE = exact_run(1).search


def extract_memory_markers(
    text: str, *, max_body_chars: int = DEFAULT_MAX_BODY_CHARS, max_markers: int | None = None
) -> MarkerExtraction:
    """Split a whole model response into visible text and ``<memory>`` markers.

    Every complete element is removed (valid ones to ``.markers``, the rest to
    ``.invalid``); an opening tag never closed is left in the text, defused (see
    ``DEFUSE``), and reported ``unterminated``. Text in fenced code blocks and inline
    code is never parsed. Valid markers past ``max_markers`` are reported invalid
    (``too many proposals``): a reply is untrusted input.

    Linear in the text: every search starts where the last one ended, or reuses it.
    """
    check_limit(max_body_chars)
    cap = check_cap(max_markers)
    if "<" not in text:  # no tag can start: nothing to do
        return MarkerExtraction(text, [], [])
    cleaner = Cleaner()
    text_, marker_, cut = cleaner.text, cleaner.marker, cleaner.cut
    text_range = cleaner.text_range
    markers: list[MemoryMarker] = []
    invalid: list[InvalidMarker] = []
    cand = TAG_OR_ELEMENT.search
    m_tag = None
    n = len(text)
    done = 0  # text before this has gone to the cleaner
    pos = 0  # inline code spans are paired from here (after the last element or fence)
    q = 0  # next place to look
    next_tag = -1  # cached next event of each kind (-1: look again)
    lead = _LEAD.match(text).end()  # type: ignore[union-attr]  # always matches
    next_bt = lead if text.startswith("```", lead) else -1
    next_tl = lead if text.startswith("~~~", lead) else -1
    if "~" not in text:  # one memchr instead of a search that finds nothing
        next_tl = n
    le_at = -1  # end of the line holding the last tag looked at
    cl_from = cl_at = n + 1  # the last CLOSER search: from where, found where (n: none)
    last_closer: re.Match[str] | None = None
    if cap is None:
        cap = n + 1
    tags = 0
    ls_seen = ls_at = 0  # start of the tag's line (-1: an element or fence ends on it)
    next_sc = -1  # the next closer outside an element: a stray one, removed
    m_sc = None
    while True:
        if next_tag < q:
            m_tag = cand(text, q)
            next_tag = m_tag.start() if m_tag is not None else n
        if next_sc < q:  # only before the next tag (a lone tag cannot hold a '<')
            m_sc = LONE_TAG.search(text, q, next_tag)
            next_sc = m_sc.start() if m_sc is not None else next_tag
        if next_bt < q:
            m = _BT3.search(text, q)  # a literal-prefix regex search beats str.find here
            next_bt = m.end() - 3 if m is not None else n
        if next_tl < q:
            m = _TL3.search(text, q)
            next_tl = m.end() - 3 if m is not None else n
        i = min(next_tag, next_sc, next_bt, next_tl)
        if i >= n:
            break
        if i != next_tag and i != next_sc:  # a run of 3+ at a line start (see the searches)
            ch = text[i]
            fence = FENCE_OPEN[ch].match(text, i)
            if fence is None:  # not a fence: its backticks may still pair on the line
                q = i + 3
                continue
            q = pos = ls_seen = fence_closing(text, ch, fence.end(1) - i, fence.end())
            ls_at = -1
            continue
        tags += 1
        if tags > MAX_TAGS:  # the rest is text, in one step
            if i > done:
                text_range(text, done, i)
            text_(defuse(text[i:]))
            invalid.append(tags_spent(text[i : i + 7]))
            done = n
            break
        k = text.rfind("\n", ls_seen, i)
        if k >= 0:
            ls_at = k + 1
        ls_seen = i
        if ls_at >= 0 and BT_LINE.match(text, ls_at, i):
            # its line starts like a fence (that failed on a backtick further on): what
            # is on it stays text, so no removal can turn the line into a fence
            q = i + 1
            continue
        start = max(ls_at, pos)  # spans pair from the line start or the last element
        if text.find("`", start, i) >= 0:
            if le_at < i:
                le_at = text.find("\n", i)
                if le_at < 0:
                    le_at = n
            line_end = le_at
            if text.find("``", start, i) < 0:  # single backticks pair up in order
                covered = 0
                if text.count("`", start, i) & 1:  # the last one before the tag opens
                    c = _SINGLE(text, i, line_end)
                    covered = c.end() if c is not None else 0
            else:
                covered = span_end(text, start, i, line_end, True)
            if covered > 0:  # the tag is inside an inline code span
                q = pos = covered
                continue
        if i == next_sc and m_sc is not None:  # a lone tag outside any element: removed
            end = m_sc.end()
            invalid.append(removed_token(m_sc.group()))
            ml = text.find("\n", i, end) >= 0
            if i > done:
                cut(text, done, i, ml)
            else:
                marker_(ml)
            done = q = pos = ls_seen = end
            ls_at = -1
            continue
        assert m_tag is not None
        scope, key, key2, scope2, body_raw = m_tag.group(2, 4, 6, 8, 9)
        if body_raw is not None:  # the usual spelling: judged here without more searches
            end = m_tag.end()
            body = (decode(body_raw) if "&" in body_raw else body_raw).strip()
            scope = scope or scope2
            key = key or key2
            if body and len(body) <= max_body_chars and (key or scope == "session"):
                if len(markers) < cap:
                    markers.append(new_marker(SCOPES[scope], key, body, text[i:end]))
                else:
                    invalid.append(too_many(text[i:end], cap))
            else:  # read well, but fails a check: say which
                result = judge(SCOPES[scope], key, body, text[i:end], max_body_chars)
                if isinstance(result, MemoryMarker):
                    markers.append(result)
                else:
                    invalid.append(result)
            ml = text.find("\n", i, end) >= 0
            if i > done:
                cut(text, done, i, ml)
            else:
                marker_(ml)
            done = q = pos = ls_seen = end
            ls_at = -1
            continue
        if i > done:
            text_range(text, done, i)
        tag = OPEN_TAG.match(text, i)
        if tag is None:  # never closed by '>': the rest of the text is released
            raw = text[i:]
            text_(defuse(raw))
            invalid.append(
                InvalidMarker(
                    InvalidReason.UNTERMINATED, raw, "the opening tag is never closed by '>'"
                )
            )
            done = n
            break
        attrs = tag.group(1)
        end = tag.end()
        if attrs.rstrip(TAG_WS).endswith("/"):
            result = build_element(text[i:end], attrs, None, max_body_chars)
        else:
            if not cl_from <= end <= cl_at:  # else the last search's answer holds
                last_closer = CLOSER.search(text, end)
                cl_from, cl_at = end, last_closer.start() if last_closer is not None else n
            closer = last_closer
            if closer is None:  # an opening tag never closed
                invalid.append(
                    InvalidMarker(
                        InvalidReason.UNTERMINATED, text[i:end], "no </memory> closes this tag"
                    )
                )
                # not a tag after all: its '<' is text (defused) and scanning goes on
                # right after it, through the tag's own text, as a re-read of the
                # visible text will
                text_("<" + DEFUSE)
                done = q = i + 1
                continue
            result = build_element(
                text[i : closer.end()], attrs, text[end : closer.start()], max_body_chars
            )
            end = closer.end()
        if not isinstance(result, MemoryMarker):
            invalid.append(result)
        elif len(markers) < cap:
            markers.append(result)
        else:
            invalid.append(too_many(result.raw, cap))
        marker_("\n" in result.raw)
        done = q = pos = ls_seen = end
        ls_at = -1
    if done < n:
        text_range(text, done, n)
    return MarkerExtraction(cleaner.eof(), markers, invalid)
