"""One numbering for a summary's lines, shared by every command and front end.

A summary's *chunks* are the lines of its current text (after earlier edits and drops),
numbered from 0; blank lines are skipped but counted, so a number names the same line
after a drop. ``kairox summary show``, the Memory view, the chat's [Summary] card, the
web app, pin and keep-long-term all number lines this way. A leaf module (it imports
only ``errors``) so that ``context`` and ``longterm`` can both use it.
"""

from __future__ import annotations

from typing import Protocol

from kairox_core.errors import KairoxUserError


class NumberedText(Protocol):
    """A summary as far as its lines go: its seq (for the error) and its text."""

    @property
    def seq(self) -> int: ...

    @property
    def text(self) -> str: ...


def chunks(text: str) -> list[str]:
    return text.split("\n")


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """A summary's non-blank lines with their numbers, as ``kairox summary show`` prints."""
    return [(i, line) for i, line in enumerate(chunks(text)) if line.strip()]


def line_of(summary: NumberedText, number: int) -> str:
    """The line ``number`` (as :func:`numbered_lines` numbers it) of ``summary``."""
    lines = dict(numbered_lines(summary.text))
    if number not in lines:
        listing = ", ".join(str(i) for i in lines) or "none"
        raise KairoxUserError(
            f"summary {summary.seq} has no line {number}; its lines are: {listing} "
            f"(as `kairox summary show` numbers them)"
        )
    return lines[number].strip()
