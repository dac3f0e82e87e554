"""Streaming extraction: the same grammar as ``extract_memory_markers``, fed in deltas.

``feed(delta)`` returns at once everything that cannot change any more. It holds back
only a possible tag start (``<mem``...), an open element, the blanks before a possible
marker, a backtick or tilde run at a line start (it may grow into a fence), and,
rarely, a tag on a line whose earlier backtick run may still close as a code span
(decided by the end of that line).

Cost: plain text with no ``<``, backtick or tilde takes a fast path of a few string
operations. Inline code is not analysed as it streams: the current line is kept as a
list of pieces and paired only when a tag start appears on it. An open element is a
list of pieces and only each new delta (plus a short carry) is searched for
``</memory>``; a fence is followed line by line. Nothing is rescanned from its start.
An element still open at ``finish`` was searched to the end without a closer, so its
body is scanned again knowing that no later tag can close either (linear, not one
rescan per unclosed tag).
"""

from __future__ import annotations

import re

from kairox_core.markers._cleanup import HWS, Cleaner
from kairox_core.markers._code import UNKNOWN, is_blank, run_end, span_end
from kairox_core.markers._grammar import (
    CANDIDATE,
    CLOSER,
    CLOSER_MAX_LEN,
    DEFAULT_MAX_BODY_CHARS,
    DEFUSE,
    LONE_TAG,
    MAX_TAGS,
    PARTIAL_TAG,
    TAG_WS,
    TOKEN_MAX_LEN,
    InvalidMarker,
    InvalidReason,
    MemoryMarker,
    build_element,
    check_cap,
    check_limit,
    defuse,
    removed_token,
    tags_spent,
    too_many,
)
from kairox_core.markers.extract import BT_LINE

_NORMAL, _FENCE, _ELEMENT, _REST = 0, 1, 2, 3  # _REST: past MAX_TAGS, all text
_SPECIAL = re.compile(r"[<`~]")
_REFEED = 8192
# may grow into a defusable
_GROWS = re.compile(r"<(?:/?(?i:m(?:e(?:m(?:o(?:r(?:y|i(?:e(?:s)?)?)?)?)?)?)?)?)\Z")
_TAG_OR_CLOSER = re.compile(CANDIDATE.pattern + "|" + LONE_TAG.pattern)
_FENCE_CACHE: dict[tuple[str, int], tuple[re.Pattern[str], re.Pattern[str]]] = {}


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

    def __init__(
        self, max_body_chars: int = DEFAULT_MAX_BODY_CHARS, max_markers: int | None = None
    ) -> None:
        self.max_body_chars = check_limit(max_body_chars)
        self.max_markers = check_cap(max_markers)
        self._no_closer = False  # finish(): the rest of the text holds no </memory>
        self._tags = 0  # tag starts decided (see MAX_TAGS)
        # The current line's start, when it is raw text (not after an element): does it
        # start like a backtick fence (True/False; None: only blanks and < 3 backticks,
        # kept in _lhead)? Tags on such a line stay text, as in the whole-text extractor.
        self._lok = True
        self._lbt: bool | None = None
        self._lhead = ""
        self.markers: list[MemoryMarker] = []
        self.invalid: list[InvalidMarker] = []
        self._c = Cleaner()
        self._mode = _NORMAL
        self._finished = False
        self._plain = True  # feed() may take the fast path (normal text, nothing held)
        self._pend = ""  # NORMAL: raw text held back (never yet shown)
        self._ctx: list[str] = []  # the current line from where code spans pair
        self._blank = True  # the raw line so far is only spaces/tabs
        self._fcand = 0  # a line-start backtick run that may still open a fence
        self._fchar = "`"
        self._fn = 3
        self._fline: str | None = None  # fence: the line so far, while it may close
        self._tag_parts: list[str] = []  # element: pieces of the open element
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
        if self._plain and "<" not in delta:
            # Fast path: plain text (backticks or tildes that cannot start a line need no
            # look: inline spans are paired only when a tag appears). Track the line,
            # hold trailing blanks.
            if "\n" not in delta:
                if self._blank:
                    if "`" in delta or "~" in delta:
                        return self._slow(delta)
                    if delta.strip(" \t"):
                        self._blank = False
                self._ctx.append(delta)
                if self._lbt is None and self._lok:
                    self._line_head(self._lhead + delta)
            elif "`" in delta or "~" in delta:
                return self._slow(delta)
            else:
                tail = delta[delta.rfind("\n") + 1 :]
                self._ctx = [tail]
                self._blank = not tail.strip(" \t")
                self._lok = True
                self._line_head(tail)
            c = self._c
            t = delta.rstrip(HWS)
            if t is delta:  # nothing stripped (str.rstrip returns the same object)
                if not t:
                    return ""  # an empty delta: held blanks stay held
                if c.held:
                    t = c.held + t
                    c.held = ""
            elif not t:
                c.held += delta
                return ""
            else:
                held = delta[len(t) :]
                if c.held:
                    t = c.held + t
                c.held = held
            c.out.append(t)
            return t
        return self._slow(delta)

    def _slow(self, delta: str) -> str:
        if self._finished:
            raise RuntimeError("MarkerStreamParser.feed() called after finish()")
        mode = self._mode
        c = self._c
        if mode == _REST:
            s = self._pend + delta if self._pend else delta
            self._pend = ""
            if "<" in s:
                lt = s.rfind("<", max(0, len(s) - 8))
                if lt >= 0 and _GROWS.match(s, lt):
                    self._pend = s[lt:]  # may grow into a tag start
                    s = s[:lt]
                s = defuse(s)
            if c.after or not s:
                mark = len(c.out)
                if s:
                    c.text(s)
                return "".join(c.out[mark:])
            t = s.rstrip(HWS)  # ``c.text(s)`` inlined, as for a fence below
            if not t:
                c.held += s
                return ""
            held = s[len(t) :]
            if c.held:
                t = c.held + t
            c.held = held
            c.out.append(t)
            return t
        if mode == _ELEMENT and self._tag:
            b = self._carry + delta if self._carry else delta
            if "</" not in b:  # inside a body: a closing tag can only start at a final '<'
                if b.endswith("<"):
                    self._body_parts.append(b[:-1])
                    self._carry = "<"
                else:
                    self._body_parts.append(b)
                    self._carry = ""
                return ""
        if mode == _FENCE and self._fline is None and "\n" not in delta and not c.after:
            # inside a fenced line that cannot close it: all visible (``c.text`` inlined)
            t = delta.rstrip(HWS)
            if not t:
                c.held += delta
                return ""
            held = delta[len(t) :]
            if c.held:
                t = c.held + t
            c.held = held
            c.out.append(t)
            return t
        mark = len(c.out)
        if mode == _ELEMENT:
            rest = self._element(delta)
            if rest is not None:
                self._process(rest, False)
        elif mode == _FENCE:
            self._process(delta, False)
        else:
            s = self._pend + delta if self._pend else delta
            self._pend = ""
            self._process(s, False)
        self._plain = self._mode == _NORMAL and not self._pend and not self._fcand and not c.after
        return "".join(c.out[mark:])

    def finish(self) -> str:
        """End of the response: release what was held; unclosed tags become text."""
        if self._finished:
            return ""
        mark = len(self._c.out)
        if self._mode == _ELEMENT and self._tag:
            body = self._release()
            self._no_closer = True
            # fed back in pieces: scanning passes the rest of its input along at each
            # tag, which on one huge body would copy it once per tag
            for k in range(0, len(body), _REFEED):
                self._slow(body[k : k + _REFEED])
        if self._mode == _ELEMENT:
            self._process(self._release(), True)
        else:
            s = self._pend
            self._pend = ""
            self._process(s, True)
        while self._mode == _ELEMENT:
            self._process(self._release(), True)
        self._c.eof()
        self._finished = True
        self._plain = False
        return "".join(self._c.out[mark:])

    # --- scanning -------------------------------------------------------------------

    def _process(self, s: str | None, final: bool) -> None:
        while s is not None:
            if self._mode == _NORMAL:
                s = self._normal(s, final)
            elif self._mode == _FENCE:
                s = self._fence(s)
            elif self._mode == _ELEMENT:
                s = self._element(s)
            else:
                self._rest(s, final)
                s = None

    def _rest(self, s: str, final: bool) -> None:
        """Past MAX_TAGS: text, defused; a possible tag start at the end waits."""
        self._pend = ""
        if "<" not in s:
            if s:
                self._c.text(s)
            return
        hold = len(s)
        if not final:
            lt = s.rfind("<", max(0, hold - 10))
            if lt >= 0 and _GROWS.match(s, lt):
                hold = lt
                self._pend = s[hold:]
                s = s[:hold]
        if s:
            self._c.text(defuse(s))

    def _at_line_start(self, s: str, i: int) -> bool:
        nl = s.rfind("\n", 0, i)
        if nl >= 0:
            return is_blank(s, nl + 1, i)
        return self._blank and is_blank(s, 0, i)

    def _context(self, s: str, res: int, i: int, final: bool) -> int:
        """Is the tag start at ``i`` in an inline code span? See ``span_end``."""
        ls = s.rfind("\n", 0, i)
        if ls >= 0 or res > 0:
            base, off, start = s, 0, max(ls + 1, res)
        else:
            prefix = "".join(self._ctx)
            base, off, start = prefix + s, len(prefix), 0
        if base.find("`", start, i + off) < 0:
            return 0  # no backtick before it on the line: not in a span
        le = base.find("\n", i + off)
        complete = le >= 0 or final
        r = span_end(base, start, i + off, le if le >= 0 else len(base), complete)
        return r - off if r > 0 else r

    def _fence_like(self, s: str, i: int) -> bool:
        """Does the line of ``s[i]`` start like a backtick fence (see ``BT_LINE``)?"""
        nl = s.rfind("\n", 0, i)
        if nl >= 0:
            return BT_LINE.match(s, nl + 1, i) is not None
        if not self._lok or self._lbt is False:
            return False
        return self._lbt or BT_LINE.match(self._lhead + s[:i]) is not None

    def _line_head(self, head: str) -> None:
        """Settle ``_lbt`` from the start of the current line (leading blanks dropped)."""
        head = head.lstrip(" \t")
        if head.startswith("```"):
            self._lbt, self._lhead = True, ""
        elif len(head) < 3 and not head.strip("`"):
            self._lbt, self._lhead = None, head
        else:
            self._lbt, self._lhead = False, ""

    def _open_fence(self, char: str, n: int) -> None:
        self._mode = _FENCE
        self._fchar = char
        self._fn = n
        self._fline = None  # the opening line cannot close the fence
        self._fcand = 0

    def _normal(self, s: str, final: bool) -> str | None:
        """Scan normal text; the rest of ``s`` if the mode changed, else None."""
        c = self._c
        n = len(s)
        q = done = res = 0
        hold = n
        while True:
            if self._fcand:
                nl = s.find("\n", q)
                if s.find("`", q, nl if nl >= 0 else n) >= 0:
                    self._fcand = 0  # a backtick on the line: not a fence
                elif nl >= 0 or final:
                    end = nl + 1 if nl >= 0 else n
                    if end > done:
                        c.text(s[done:end])
                    self._open_fence("`", self._fcand)
                    self._fline = "" if nl >= 0 else None
                    return s[end:] if end < n else None
                else:
                    m = _TAG_OR_CLOSER.search(s, q)
                    if m is not None:
                        hold = m.start()
                    else:
                        lt = s.rfind("<", max(q, n - TOKEN_MAX_LEN))
                        if lt >= 0 and PARTIAL_TAG.match(s, lt):
                            hold = lt
                    break
            m = _SPECIAL.search(s, q)
            if m is None:
                break
            i = m.start()
            ch = s[i]
            if ch == "<":
                if n - i < TOKEN_MAX_LEN and not final and PARTIAL_TAG.match(s, i):
                    hold = i
                    break
                closer = None
                if CANDIDATE.match(s, i) is None:
                    closer = LONE_TAG.match(s, i)
                    if closer is None:
                        q = i + 1
                        continue
                covered = self._context(s, res, i, final)
                if covered == UNKNOWN:
                    hold = i
                    break
                self._tags += 1
                if self._tags > MAX_TAGS:  # as the whole-text extractor: the rest is text
                    if i > done:
                        c.text(s[done:i])
                    self.invalid.append(tags_spent(s[i : i + 7]))
                    self._mode = _REST
                    return s[i:]
                if self._fence_like(s, i):
                    q = i + 1
                    continue
                if covered > 0:
                    q = res = covered
                    continue
                if closer is not None:  # outside any element: removed (stray or misspelt)
                    if i > done:
                        c.text(s[done:i])
                    raw = closer.group()
                    self.invalid.append(removed_token(raw))
                    c.marker("\n" in raw)
                    self._after_element()
                    return s[closer.end() :] or None
                if i > done:
                    c.text(s[done:i])
                self._track(s, i, res)  # kept should the tag be released as text
                return self._element(s[i:])
            j = run_end(s, i)
            if j == n and not final and self._at_line_start(s, i):
                hold = i  # may grow into a fence
                break
            if j - i >= 3 and self._at_line_start(s, i):
                if ch == "~":
                    self._emit_open(s, done, j, "~", j - i)
                    return s[j:] if j < n else None
                le = s.find("\n", j)
                if s.find("`", j, le if le >= 0 else n) < 0:
                    if le >= 0 or final:
                        self._emit_open(s, done, j, "`", j - i)
                        return s[j:] if j < n else None
                    self._fcand = j - i
            q = j
        if hold > done:
            c.text(s[done:hold])
        self._track(s, hold, res)
        self._pend = s[hold:]
        return None

    def _track(self, s: str, hold: int, res: int) -> None:
        """Follow the current line through ``s[:hold]`` (spans pair from ``res``)."""
        nl = s.rfind("\n", 0, hold)
        if nl >= 0:
            self._lok = True
            self._line_head(s[nl + 1 : hold])
        elif self._lok and self._lbt is None:
            self._line_head(self._lhead + s[:hold])
        if nl >= 0:
            self._ctx = [s[max(nl + 1, res) : hold]]
            self._blank = is_blank(s, nl + 1, hold)
        else:
            if res > 0:
                self._ctx = [s[res:hold]]
            else:
                self._ctx.append(s[:hold])
            if self._blank:
                self._blank = is_blank(s, 0, hold)

    def _emit_open(self, s: str, done: int, j: int, char: str, n: int) -> None:
        if j > done:
            self._c.text(s[done:j])
        self._open_fence(char, n)

    def _fence(self, s: str) -> str | None:
        """Inside a fence: all text is visible; look for the closing line."""
        closing, prefix = _fence_lines(self._fchar, self._fn)
        pos = 0
        while True:
            nl = s.find("\n", pos)
            if nl < 0:
                if self._fline is not None:
                    self._fline += s[pos:]
                    if prefix.fullmatch(self._fline) is None:
                        self._fline = None
                if s:
                    self._c.text(s)
                return None
            if self._fline is not None and closing.fullmatch(self._fline + s[pos:nl]):
                if nl:
                    self._c.text(s[:nl])
                self._mode = _NORMAL
                self._ctx = []
                self._blank = False
                return s[nl:]
            self._fline = ""
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
            s = s[g + 1 :]
            attrs_full = tag[7:-1]
            if attrs_full.rstrip(TAG_WS).endswith("/"):
                self._record(build_element(tag, attrs_full, None, self.max_body_chars))
                return s
            self._tag = tag
            if self._no_closer:  # finish(): nothing can close it
                self._body_parts = [s]
                return self._release()
        if self._carry:
            s = self._carry + s
            self._carry = ""
        if "</" not in s:
            if s.endswith("<"):
                self._body_parts.append(s[:-1])
                self._carry = "<"
            else:
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
        return s[m.end() :]

    def _record(self, result: MemoryMarker | InvalidMarker) -> None:
        if not isinstance(result, MemoryMarker):
            self.invalid.append(result)
        elif self.max_markers is None or len(self.markers) < self.max_markers:
            self.markers.append(result)
        else:
            self.invalid.append(too_many(result.raw, self.max_markers))
        self._c.marker("\n" in result.raw)
        self._after_element()

    def _after_element(self) -> None:
        self._mode = _NORMAL
        self._lok = False  # the element ends on this line
        self._ctx = []  # code spans pair from the element's end
        self._blank = False  # its '>' is on this line

    def _release(self) -> str:
        """At the end: an unclosed element's opening tag becomes text; the body returns."""
        if not self._tag:
            raw = "".join(self._tag_parts)
            self._tag_parts = []
            self._after_element()
            self._c.text(defuse(raw))
            self.invalid.append(
                InvalidMarker(
                    InvalidReason.UNTERMINATED, raw, "the opening tag is never closed by '>'"
                )
            )
            return ""
        tag = self._tag
        body = "".join(self._body_parts) + self._carry
        self._tag = ""
        self._body_parts = []
        self._carry = ""
        # not a tag after all: its '<' is text (defused) and scanning goes on right
        # after it, through the tag's own text (as the whole-text extractor does)
        self._mode = _NORMAL
        self._track("<", 1, 0)
        self._c.text("<" + DEFUSE)
        self.invalid.append(
            InvalidMarker(InvalidReason.UNTERMINATED, tag, "no </memory> closes this tag")
        )
        return tag[1:] + body
