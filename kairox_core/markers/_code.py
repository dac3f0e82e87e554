"""Code-context helpers shared by both extractors: fences and inline code spans."""

from __future__ import annotations

import re

_NON_BLANK = re.compile(r"[^ \t]")
_RUNS = {"`": re.compile(r"`+"), "~": re.compile(r"~+")}
_BACKTICKS = _RUNS["`"]
_EXACT: dict[int, re.Pattern[str]] = {}
_CLOSING: dict[tuple[str, int], re.Pattern[str]] = {}

# A fence's opening run (when it starts its line, which the caller checks): group 1 is
# the run; a backtick fence's info string holds no backtick. ``fence_closing`` from its
# end finds where it closes.
FENCE_OPEN = {
    "`": re.compile(r"(`{3,}+)[^`\n]*+(?=\n|\Z)"),
    "~": re.compile(r"(~{3,}+)"),
}

UNKNOWN = -1  # span_end: the line is not complete yet


def is_blank(text: str, start: int = 0, end: int | None = None) -> bool:
    """Only spaces and tabs in ``text[start:end]``."""
    return _NON_BLANK.search(text, start, len(text) if end is None else end) is None


def run_end(text: str, i: int) -> int:
    """End of the run of ``text[i]`` (a backtick or tilde) starting at ``i``."""
    m = _RUNS[text[i]].match(text, i)
    assert m is not None
    return m.end()


def exact_run(n: int) -> re.Pattern[str]:
    """A backtick run of exactly ``n``: what closes an inline span opened by ``n``."""
    pat = _EXACT.get(n)
    if pat is None:
        pat = _EXACT[n] = re.compile(r"(?<!`)`{" + str(n) + r"}(?!`)")
    return pat


def closing_line(char: str, n: int) -> re.Pattern[str]:
    """A line closing a fence of ``n`` ``char``, from the newline before it."""
    pat = _CLOSING.get((char, n))
    if pat is None:
        c = re.escape(char)
        pat = _CLOSING[(char, n)] = re.compile(
            r"\n[ \t]*" + c + "{" + str(n) + r",}[ \t\r]*(?=\n|\Z)"
        )
    return pat


def fence_closing(text: str, char: str, n: int, start: int) -> int:
    """Where the fence opened before ``start`` ends: its closing line's end, or the end."""
    m = closing_line(char, n).search(text, start)
    return m.end() if m is not None else len(text)


def span_end(text: str, start: int, i: int, line_end: int, complete: bool) -> int:
    """Pairing backtick runs from ``start`` (on ``i``'s line): the end of the inline
    span that covers ``i``, 0 if none does, UNKNOWN if that depends on text not yet
    seen (``complete`` False and ``line_end`` is the end of what is known)."""
    p = start
    while True:
        r = _BACKTICKS.search(text, p, i)
        if r is None:
            return 0
        c = exact_run(r.end() - r.start()).search(text, r.end(), line_end)
        if c is not None and (complete or c.end() < line_end):
            if c.start() > i:
                return c.end()
            p = c.end()
            continue
        if not complete:
            return UNKNOWN
        p = r.end()
