"""Streaming extraction: the same grammar as ``extract_memory_markers``, fed in deltas.

``feed(delta)`` returns at once everything that cannot change any more. It holds back
only a possible tag start (``<mem``...), an open element, the spaces before a
possible marker, and, rarely, a ``<memory`` tag on a line whose earlier backtick run
may still turn out to open a code span (decided when the line ends).

Cost: plain text with no ``<``, backtick or tilde takes a fast path (a few string
operations); an open element is kept as a list of pieces and only the new delta (plus
a short carry) is searched for ``</memory>``; a fence is followed line by line. No
buffer is rescanned from its start except the current line while a tag on it waits
for a code span to close.
"""

from __future__ import annotations

import re

from kairox_core.markers._cleanup import HWS, Cleaner
from kairox_core.markers._grammar import (
    CANDIDATE,
    CLOSER,
    CLOSER_MAX_LEN,
    DEFAULT_MAX_BODY_CHARS,
    PARTIAL_CANDIDATE,
    TAG_WS,
    InvalidMarker,
    InvalidReason,
    MemoryMarker,
    build_element,
    check_limit,
)

_NORMAL, _FENCE, _ELEMENT = 0, 1, 2
_SPECIAL = re.compile(r"[<`~]")
_SPECIAL_NL = re.compile(r"[<`~\n]")
_NON_BLANK = re.compile(r"[^ \t]")
_BACKTICKS = re.compile(r"`+")
_TILDES = re.compile(r"~+")
_RUN_CACHE: dict[int, re.Pattern[str]] = {}
_FENCE_CACHE: dict[tuple[str, int], tuple[re.Pattern[str], re.Pattern[str]]] = {}


def _run_of(n: int) -> re.Pattern[str]:
    """A backtick run of exactly ``n``: the closer of an inline span."""
    pat = _RUN_CACHE.get(n)
    if pat is None:
        pat = _RUN_CACHE[n] = re.compile(r"(?<!`)`{" + str(n) + r"}(?!`)")
    return pat


def _fence_lines(char: str, n: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(closing line, prefix of a closing line) for a fence of ``n`` ``char``."""
    pats = _FENCE_CACHE.get((char, n))
    if pats is None:
        c = re.escape(char)
        pats = _FENCE_CACHE[(char, n)] = (
            re.compile(r"[ \t]*" + c + "{" + str(n) + r",}[ \t\r]*"),
            re.compile(r"[ \t]*(?:" + c + r"+[ \t\r]*)?"),
        )
    return pats


class MarkerStreamParser:
    """Incremental ``<memory>`` extraction for a streamed model response.

    Feeding any split of a text and then calling ``finish()`` yields exactly the
    visible text, markers and invalid markers of ``extract_memory_markers`` on it.
    """

    def __init__(self, max_body_chars: int = DEFAULT_MAX_BODY_CHARS) -> None:
        self.max_body_chars = check_limit(max_body_chars)
        self.markers: list[MemoryMarker] = []
        self.invalid: list[InvalidMarker] = []
        self._c = Cleaner()
        self._mode = _NORMAL
        self._finished = False
        # NORMAL / FENCE: unconsumed raw text and positions in it
        self._pend = ""
        self._pos = 0
        self._emitted = 0  # raw text before this index has gone to the cleaner
        self._line_text = False  # the raw line before _pend[0] has a non-blank character
        self._tent = -1  # index of a backtick run whose span may still close on this line
        self._tent_n = 0
        self._fcand = False  # ... and it may open a backtick fence instead
        self._fchar = "`"
        self._fn = 3
        self._fdead = True  # the current fence line can no longer be a closing line
        # ELEMENT: pieces of the open element
        self._tag_parts: list[str] = []
        self._tag = ""  # the complete opening tag once seen
        self._body_parts: list[str] = []
        self._carry = ""

    # --- public ---------------------------------------------------------------------

    @property
    def visible(self) -> str:
        """Everything returned so far by ``feed`` and ``finish``."""
        return "".join(self._c.out)

    def feed(self, delta: str) -> str:
        """Take the next piece of the response; return the visible text now safe to show."""
        if self._finished:
            raise RuntimeError("MarkerStreamParser.feed() called after finish()")
        c = self._c
        if (
            self._mode == _NORMAL and not self._pend and self._tent < 0 and not c.after
            and "<" not in delta and "`" not in delta and "~" not in delta
        ):
            # Fast path: plain text. Track whether the line has text, hold trailing blanks.
            nl = delta.rfind("\n")
            if nl >= 0:
                self._line_text = _NON_BLANK.search(delta, nl + 1) is not None
            elif not self._line_text:
                self._line_text = _NON_BLANK.search(delta) is not None
            t = delta.rstrip(HWS)
            if not t:
                c.held += delta
                return ""
            held = delta[len(t):]
            if c.held:
                t = c.held + t
            c.held = held
            c.out.append(t)
            c.prev = c.last
            c.last = t
            return t
        mark = len(c.out)
        if self._mode == _ELEMENT:
            rest = self._element(delta)
            if rest is None:
                return ""
            self._set_pend(rest)
        else:
            self._pend = self._pend + delta if self._pend else delta
        self._run(final=False)
        return "".join(c.out[mark:])

    def finish(self) -> str:
        """End of the response: release what was held; unclosed tags become text."""
        if self._finished:
            return ""
        mark = len(self._c.out)
        while True:
            if self._mode == _ELEMENT:
                self._set_pend(self._release())
            if self._tent >= 0:  # the line is complete now: decide again from the run
                self._pos = self._tent
                self._tent = -1
                self._fcand = False
            self._run(final=True)
            if self._mode != _ELEMENT:
                break
        self._c.eof()
        self._finished = True
        return "".join(self._c.out[mark:])

    # --- scanning -------------------------------------------------------------------

    def _set_pend(self, text: str) -> None:
        self._mode = _NORMAL
        self._pend = text
        self._pos = self._emitted = 0
        self._line_text = True  # after an element: its '>' is on this line
        self._tent = -1
        self._fcand = False

    def _emit_to(self, j: int) -> None:
        if j > self._emitted:
            self._c.text(self._pend[self._emitted:j])
            self._emitted = j

    def _at_line_start(self, i: int) -> bool:
        pend = self._pend
        nl = pend.rfind("\n", 0, i)
        if nl >= 0:
            return _NON_BLANK.search(pend, nl + 1, i) is None
        return not self._line_text and _NON_BLANK.search(pend, 0, i) is None

    def _run(self, final: bool) -> None:
        while True:
            if self._mode == _NORMAL:
                if not self._normal(final):
                    break
            elif self._mode == _FENCE:
                if not self._fence(final):
                    break
            else:
                return  # an element swallowed the rest
        self._trim()

    def _trim(self) -> None:
        pend = self._pend
        keep = self._pos if self._tent < 0 else self._tent
        if keep <= 0:
            return
        nl = pend.rfind("\n", 0, keep)
        if nl >= 0:
            self._line_text = _NON_BLANK.search(pend, nl + 1, keep) is not None
        elif not self._line_text:
            self._line_text = _NON_BLANK.search(pend, 0, keep) is not None
        self._pend = pend[keep:]
        self._pos -= keep
        self._emitted = max(0, self._emitted - keep)
        if self._tent >= 0:
            self._tent -= keep

    def _normal(self, final: bool) -> bool:
        """Scan in normal text. False: wait for input; True: the mode changed."""
        pend = self._pend
        n = len(pend)
        pos = self._pos
        while True:
            m = (_SPECIAL_NL if self._tent >= 0 else _SPECIAL).search(pend, pos)
            if m is None:
                self._emit_to(n)
                self._pos = n
                return False
            i = m.start()
            ch = pend[i]
            if ch == "\n":  # the line of a tentative run ended without its closer
                if self._fcand:
                    self._emit_to(i + 1)
                    self._open_fence("`", self._tent_n, i + 1, dead=False)
                    return True
                self._tent = -1
                pos = i + 1
                continue
            if ch == "<":
                if n - i < 8 and not final and PARTIAL_CANDIDATE.match(pend, i):
                    self._emit_to(i)
                    self._pos = i
                    return False
                if CANDIDATE.match(pend, i) is None:
                    pos = i + 1
                    continue
                if self._tent >= 0:  # in code or not: known when the line ends
                    self._emit_to(i)
                    self._pos = self._tent
                    self._tent = -1
                    self._fcand = False
                    return False
                self._emit_to(i)
                rest = self._element(pend[i:])
                if rest is None:
                    self._pend = ""
                    self._pos = self._emitted = 0
                    return False
                self._set_pend(rest)
                pend = rest
                n = len(pend)
                pos = 0
                continue
            run = (_BACKTICKS if ch == "`" else _TILDES).match(pend, i)
            assert run is not None
            j = run.end()
            if j == n and not final:  # the run may grow
                self._emit_to(i)
                self._pos = i
                return False
            size = j - i
            if ch == "~":
                if self._tent < 0 and size >= 3 and self._at_line_start(i):
                    self._emit_to(j)
                    self._open_fence("~", size, j, dead=True)
                    return True
                pos = j
                continue
            if self._tent >= 0:
                if size == self._tent_n:
                    self._tent = -1
                self._fcand = False
                pos = j
                continue
            nl = pend.find("\n", j)
            line_end = nl if nl >= 0 else n
            if size >= 3 and self._at_line_start(i) and pend.find("`", j, line_end) < 0:
                if nl >= 0 or final:
                    self._emit_to(j)
                    self._open_fence("`", size, j, dead=True)
                    return True
                self._tent = i
                self._tent_n = size
                self._fcand = True
                pos = j
                continue
            closer = _run_of(size).search(pend, j, line_end)
            if closer is not None and (closer.end() < n or nl >= 0 or final):
                pos = closer.end()  # a complete code span
                continue
            if nl >= 0 or final:
                pos = j  # literal backticks
                continue
            self._tent = i
            self._tent_n = size
            self._fcand = False
            pos = j

    def _open_fence(self, char: str, n: int, pos: int, *, dead: bool) -> None:
        self._mode = _FENCE
        self._fchar = char
        self._fn = n
        self._pos = pos
        self._fdead = dead
        self._tent = -1
        self._fcand = False

    def _fence(self, final: bool) -> bool:
        """Inside a fence: all text is visible; look for the closing line."""
        pend = self._pend
        closing, prefix = _fence_lines(self._fchar, self._fn)
        pos = self._pos
        while True:
            nl = pend.find("\n", pos)
            if nl < 0:
                if not self._fdead and prefix.fullmatch(pend, pos) is None:
                    self._fdead = True
                self._emit_to(len(pend))
                self._pos = len(pend) if self._fdead else pos
                return False
            if not self._fdead and closing.fullmatch(pend, pos, nl) is not None:
                self._emit_to(nl)
                self._mode = _NORMAL
                self._pos = nl
                return True
            self._fdead = False
            pos = nl + 1

    # --- elements -------------------------------------------------------------------

    def _element(self, s: str) -> str | None:
        """Feed raw text to the open element; the text after it once it is complete."""
        self._mode = _ELEMENT
        if not self._tag:
            g = s.find(">")
            if g < 0:
                self._tag_parts.append(s)
                return None
            self._tag_parts.append(s[: g + 1])
            tag = "".join(self._tag_parts)
            self._tag_parts = []
            s = s[g + 1:]
            attrs_full = tag[7:-1]
            if attrs_full.rstrip(TAG_WS).endswith("/"):
                self._record(build_element(tag, attrs_full, None, self.max_body_chars))
                return s
            self._tag = tag
        if self._carry:
            s = self._carry + s
            self._carry = ""
        elif "<" not in s:
            self._body_parts.append(s)
            return None
        m = CLOSER.search(s)
        if m is None:
            k = s.rfind("<", max(0, len(s) - CLOSER_MAX_LEN))
            if k >= 0:
                self._body_parts.append(s[:k])
                self._carry = s[k:]
            else:
                self._body_parts.append(s)
            return None
        self._body_parts.append(s[: m.start()])
        body = "".join(self._body_parts)
        raw = self._tag + body + m.group()
        self._record(build_element(raw, self._tag[7:-1], body, self.max_body_chars))
        self._tag = ""
        self._body_parts = []
        return s[m.end():]

    def _record(self, result: MemoryMarker | InvalidMarker) -> None:
        if isinstance(result, MemoryMarker):
            self.markers.append(result)
        else:
            self.invalid.append(result)
        self._c.marker()

    def _release(self) -> str:
        """At the end: an unclosed element's opening tag becomes text; the body returns."""
        if not self._tag:
            raw = "".join(self._tag_parts)
            self._tag_parts = []
            self._c.text(raw)
            self.invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, raw,
                                              "the opening tag is never closed by '>'"))
            return ""
        tag = self._tag
        body = "".join(self._body_parts) + self._carry
        self._tag = ""
        self._body_parts = []
        self._carry = ""
        self._c.text(tag)
        self.invalid.append(InvalidMarker(InvalidReason.UNTERMINATED, tag,
                                          "no </memory> closes this tag"))
        return body
