"""Turning raw text minus markers into clean visible text.

Both extractors push the same event sequence into a ``Cleaner``: ``text(piece)`` for
raw text (in any split) and ``marker()`` where an element was removed, then ``eof()``.
The rules only look backwards at what was already output and forwards at the
whitespace after a marker, so they can run on a stream:

* trailing spaces/tabs of the output are held until something other than a marker
  follows (then they are output unchanged);
* a marker alone on its line takes the line (and its newline) with it, and a blank
  line after it too when the line before is blank (or it is at the very start);
* elsewhere the spaces around a marker collapse to one (to none before closing
  punctuation or at the end of a line or of the text).

Removal joins the text on both sides, so it could assemble markup that was not there:
``<mem`` + marker + ``ory scope=...>`` a new tag, ``` `` ``` + marker + ``` ` ``` a
longer backtick run, a run that now starts its line a fence. Where the first character
after a removed marker would do that, ``DEFUSE`` (invisible) is put at the join, so the
visible text never parses into more markup than it showed (issue 13, item 4). One
exception: a line that starts with a backtick or tilde run (a fence or a code span the
reply had) after a tag that may still grow (``<memories`` + blanks + a marker alone on
its line) gets ``DEFUSE`` after its run, not before it, which would break the fence.
"""

from __future__ import annotations

import re

from kairox_core.markers._code import run_end
from kairox_core.markers._grammar import DEFUSE, GROWING_MAX, grows_into_tag

HWS = " \t\r"
WS = " \t\r\n"
_CLOSING_PUNCT = frozenset(".,;:!?)]}")
_NON_WS = re.compile(r"[^ \t\r\n]").search


class Cleaner:
    __slots__ = ("after", "after_run", "held", "lstart", "ml", "out", "ws")

    def __init__(self) -> None:
        self.out: list[str] = []  # output pieces, never empty strings
        self.held = ""  # trailing horizontal whitespace not yet output
        self.after = False  # right after a removed marker, collecting whitespace
        self.lstart = False  # that marker group began at the start of a line
        self.ws = ""  # whitespace seen after the marker group
        self.ml = False  # a marker of the group spans lines
        self.after_run = False  # DEFUSE goes after the run the next text starts with

    def _emit(self, piece: str) -> None:
        self.out.append(piece)

    def _tail2(self) -> str:
        """The last two characters output; the start of the text counts as a blank line."""
        out = self.out
        if not out:
            return "\n\n"
        last = out[-1]
        if len(last) >= 2:
            return last[-2:]
        return (out[-2][-1:] if len(out) >= 2 else "\n") + last

    def _tail(self, k: int) -> str:
        """The last ``k`` (or fewer) characters output."""
        out = self.out
        tail = ""
        for piece in reversed(out):
            tail = piece + tail
            if len(tail) >= k:
                return tail[-k:]
        return tail

    def _line_blank(self) -> bool:
        """Only spaces/tabs output since the last newline (or the start)."""
        for piece in reversed(self.out):
            t = piece.rstrip(" \t")
            if t:
                return t[-1] == "\n"
        return True

    def _line_has_backtick(self) -> bool:
        for piece in reversed(self.out):
            k = piece.rfind("\n")
            if k >= 0:
                return "`" in piece[k + 1 :]
            if "`" in piece:
                return True
        return False

    def _joins(self, first: str, nxt: str, newline: bool) -> bool:
        """Would output starting with ``first`` (the next non-blank being ``nxt``) right
        after a removed marker build markup? See the module docstring."""
        if not first:
            return False
        if not self.out:
            return nxt != "" and nxt in "`~" and not newline
        if grows_into_tag(self._tail(GROWING_MAX), first):
            return True
        if newline or not nxt or nxt not in "`~":
            return False
        return self._tail(1) == nxt or self._line_blank()

    def text(self, s: str) -> None:
        if self.after:
            stripped = s.lstrip(WS)
            if not stripped:
                self.ws += s
                return
            self.ws += s[: len(s) - len(stripped)]
            s = stripped
            self._resolve(s[0])
        if self.after_run:
            self.after_run = False
            k = run_end(s, 0)
            s = s[:k] + DEFUSE + s[k:]
        t = s.rstrip(HWS)
        if t:
            self._emit(self.held + t if self.held else t)
            self.held = s[len(t) :]
        else:
            self.held += s

    def text_range(self, src: str, a: int, b: int) -> bool:
        """``text(src[a:b])`` (``a < b``) copying only what is output, once: the
        whole-text extractor passes ranges of the response instead of slices, as
        ``lstrip``/``rstrip``/concatenation would each copy the text again. Returns
        False when the range was only whitespace after a marker (nothing settled)."""
        if self.after:
            m = _NON_WS(src, a, b)
            if m is None:
                self.ws += src[a:b]
                return False
            j = m.start()
            if j > a:
                self.ws += src[a:j]
                a = j
            self._resolve(src[a])
            if self.after_run:  # rare: no need to spare a copy
                self.text(src[a:b])
                return True
        e = b
        while e > a and src[e - 1] in HWS:
            e -= 1
        if e > a:
            out = self.out
            if self.held:
                out.append(self.held)
            out.append(src[a:e])
            self.held = src[e:b] if e < b else ""
        else:
            self.held += src[a:b]
        return True

    def cut(self, src: str, a: int, b: int, ml: bool = False) -> None:
        """``text_range(src, a, b)`` then ``marker()``: the whole-text step, with the usual
        case (whitespace holding a newline after the previous marker) settled inline."""
        out = self.out
        if self.after:
            m = _NON_WS(src, a, b)
            if m is None:
                self.ws += src[a:b]
                self.marker(ml)
                return
            j = m.start()
            ws = self.ws + src[a:j] if j > a else self.ws
            a = j
            nl = ws.find("\n")
            if nl >= 0:  # ``_resolve`` for this case, inlined
                rest = ws[nl + 1 :]
                if not self.lstart:
                    rest = "\n" + rest
                elif self._tail2() == "\n\n":
                    rest = rest[rest.rfind("\n") + 1 :]
                if out and self._joins(rest[:1] or src[a], src[a], True):
                    self._defuse_line(rest[:1], src[a])
                t = rest.rstrip(HWS)
                if t:
                    out.append(t)
                    self.held = rest[len(t) :]
                else:
                    self.held = rest
            else:
                self.ws = ws
                self._resolve(src[a])
        if self.after_run:  # rare: no need to spare a copy
            self.after = False  # settled above
            self.text(src[a:b])
        else:
            e = b
            while e > a and src[e - 1] in HWS:
                e -= 1
            if e > a:
                if self.held:
                    out.append(self.held)
                out.append(src[a:e])
                self.held = src[e:b] if e < b else ""
            else:
                self.held += src[a:b]
        self.after = True
        self.ws = ""
        self.ml = ml
        self.lstart = out[-1][-1] == "\n" if out else True

    def marker(self, ml: bool = False) -> None:
        """A marker was removed here; ``ml``: its raw text spans lines."""
        if not self.after:
            self.after = True
            self.ml = ml
            self.ws = ""
            out = self.out
            self.lstart = out[-1][-1] == "\n" if out else True
            return
        if "\n" in self.ws:
            self._resolve("<")
            self.after = True
            self.ml = ml
            self.ws = ""
            self.lstart = self._tail2().endswith("\n")
            return
        if not self.lstart and not self.held:
            self.held = self.ws
        self.ws = ""
        self.ml = self.ml or ml

    def _resolve(self, nxt: str) -> None:
        """Settle the whitespace after a marker group; ``nxt`` is the next character
        ("" at the end of the text, "<" when another marker follows)."""
        self.after = False
        ws = self.ws
        self.ws = ""
        nl = ws.find("\n")
        if nl >= 0:
            rest = ws[nl + 1 :]
            if not self.lstart:
                rest = "\n" + rest
            elif self._tail2() == "\n\n":
                rest = rest[rest.rfind("\n") + 1 :]
            if self.out and self._joins(rest[:1] or nxt, nxt, True):
                self._defuse_line(rest[:1], nxt)
            # ``text(rest)`` with nothing held, inlined: ``rest`` is only whitespace
            t = rest.rstrip(HWS)
            if t:
                self.out.append(t)
                self.held = rest[len(t) :]
            else:
                self.held = rest
            return
        if not nxt:
            self.held = ""
            return
        if not self.lstart:
            if nxt in _CLOSING_PUNCT:
                self.held = ""
            elif not self.held:
                self.held = ws
            if self.ml and self._line_has_backtick():
                # the marker spanned lines: joining them could pair backticks anew
                self.held = ""
                if grows_into_tag(self._tail(GROWING_MAX), "\n"):
                    self.out.append(DEFUSE)
                self.out.append("\n")
        if self._joins(self.held[:1] or nxt, nxt, False):
            self.out.append(DEFUSE)

    def _defuse_line(self, first: str, nxt: str) -> None:
        """Break a tag growing across a line break: here, unless the new line starts
        here (``first`` is not its newline) with a backtick or tilde run (a fence or
        span the reply had): then after that run."""
        if first != "\n" and (nxt == "`" or nxt == "~"):
            self.after_run = True
        else:
            self.out.append(DEFUSE)

    def eof(self) -> str:
        if self.after:
            self._resolve("")
        if self.held:
            self._emit(self.held)
            self.held = ""
        return "".join(self.out)
