"""Whole-text extraction: one compiled regex scan, one Python step per marker.

Each match of ``TOKEN`` is "everything up to the next marker" plus that marker. The
prefix consumes, inside the regex engine, plain text, fenced code blocks, inline code
spans and stray ``<``/backticks/tildes, so code never reaches Python and a marker in
code is never seen. The prefix stops only at a ``<memory`` tag start outside code,
where one of the marker branches always matches: the loop never backtracks.

Code rules (CommonMark-like, decidable by the end of the line):
* a run of 3+ backticks or tildes at the start of a line (after spaces/tabs) opens a
  fence (a backtick fence's info string has no backtick); it closes at a line holding
  only 3+ of the same character, at least as many as the opener; else at the end;
* any other backtick run opens an inline span closed by the next run of exactly the
  same length on the same line; with no such run it is literal text.
"""

from __future__ import annotations

import re

from kairox_core.markers._cleanup import Cleaner
from kairox_core.markers._grammar import (
    CLOSER_MAX_WS,
    DEFAULT_MAX_BODY_CHARS,
    InvalidMarker,
    InvalidReason,
    MarkerExtraction,
    MemoryMarker,
    build_element,
    check_limit,
)

_TWS = r"[ \t\r\n\f]"
_FENCE_BT = (
    r"(?P<fb>`{3,})(?!`)[^`\n]*(?=\n|\Z)"
    r"(?:(?s:.*?)\n[ \t]*(?P=fb)`*[ \t\r]*(?=\n|\Z)|(?s:.*))"
)
_FENCE_TL = (
    r"(?P<ft>~{3,})(?!~)[^\n]*"
    r"(?:(?s:.*?)\n[ \t]*(?P=ft)~*[ \t\r]*(?=\n|\Z)|(?s:.*))"
)
_PREFIX = (
    r"(?:"
    r"(?:\n|(?<![^\n]))[ \t]*(?:" + _FENCE_BT + "|" + _FENCE_TL + ")"
    r"|[^<`~\n]+(?:\n(?![ \t]*[`~])[^<`~\n]*)*"
    r"|\n"
    r"|(?P<cs>`+)(?!`)[^\n]*?(?<!`)(?P=cs)(?!`)"
    r"|`+"
    r"|~+"
    r"|<(?!(?i:memory)[ \t\r\n\f/>])"
    r")*"
)
_MARKER = (
    r"(?P<el><(?i:memory)(?=[ \t\r\n\f/>])(?P<attrs>[^>]*?)(?P<sc>/" + _TWS + r"*)?>"
    r"(?(sc)|(?:(?P<body>(?s:.*?))</(?i:memory)" + _TWS + "{0," + str(CLOSER_MAX_WS) + "}>)?))"
    + r"|(?P<eoftag><(?i:memory)(?=[ \t\r\n\f/>])[^>]*\Z)"
)
TOKEN = re.compile(_PREFIX + r"(?:" + _MARKER + r"|\Z)")


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
    match = TOKEN.match
    pos = 0
    while True:
        m = match(text, pos)
        assert m is not None  # the pattern always matches (possibly empty, at the end)
        start = m.start("el")
        if start < 0:
            start = m.start("eoftag")
            if start < 0:  # plain text to the end
                if pos < len(text):
                    cleaner.text(text[pos:])
                break
            if pos < start:
                cleaner.text(text[pos:start])
            cleaner.text(text[start:])
            invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, text[start:],
                                         "the opening tag is never closed by '>'"))
            break
        if pos < start:
            cleaner.text(text[pos:start])
        end = m.end()
        raw = text[start:end]
        body = m.group("body")
        if body is None and m.start("sc") < 0:  # opening tag without a closing tag
            cleaner.text(raw)
            invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, raw,
                                         "no </memory> closes this tag"))
        else:
            attrs_full = text[m.start("attrs"):m.end("sc") if body is None else m.end("attrs")]
            result = build_element(raw, attrs_full, body, max_body_chars)
            if isinstance(result, MemoryMarker):
                markers.append(result)
            else:
                invalid.append(result)
            cleaner.marker()
        pos = end
    return MarkerExtraction(cleaner.eof(), markers, invalid)
