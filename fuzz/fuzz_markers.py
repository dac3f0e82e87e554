"""Coverage-guided fuzzing of the marker parsers with atheris (``nox -s fuzz``).

Each input is a reply plus split points and, for one input in four, small limits
(``max_markers``, ``max_body_chars``) so the caps' paths are fuzzed too. Checked:
neither parser raises; the stream parser under that split gives exactly the whole-text
result; the visible text never parses into a marker or an invalid element again (issue
13, items 4 and 11); no character other than a blank is lost: what is shown is the
reply minus the removed elements and tags, blanks aside.

    python fuzz/fuzz_markers.py -runs=20000 -dict=fuzz/markers.dict [corpus_dir]
"""

from __future__ import annotations

import sys
from collections import Counter

import atheris

with atheris.instrument_imports():
    from kairox_core.markers import (
        DEFAULT_MAX_BODY_CHARS,
        DEFUSE,
        InvalidReason,
        MarkerExtraction,
        MarkerStreamParser,
        extract_memory_markers,
    )


def _ink(text: str) -> Counter[str]:
    return Counter(c for c in text if not c.isspace() and c != DEFUSE)


def check_nothing_lost(text: str, whole: MarkerExtraction) -> None:
    removed = [m.raw for m in whole.markers]
    # unterminated tags and, past MAX_TAGS, the rest of the reply stay visible
    removed += [
        i.raw
        for i in whole.invalid
        if i.reason != InvalidReason.UNTERMINATED
        and not (i.reason == InvalidReason.TOO_MANY and "the rest is text" in i.detail)
    ]
    if _ink(text) != _ink(whole.visible) + _ink("".join(removed)):
        raise AssertionError(f"{whole.visible!r} (from {text!r}) lost or gained text")


def check(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    cuts = sorted(fdp.ConsumeIntInRange(0, 4096) for _ in range(fdp.ConsumeIntInRange(0, 8)))
    limited = fdp.ConsumeIntInRange(0, 3) == 0
    cap = fdp.ConsumeIntInRange(0, 2) if limited else None
    body = fdp.ConsumeIntInRange(1, 4) if limited else DEFAULT_MAX_BODY_CHARS
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    whole = extract_memory_markers(text, max_body_chars=body, max_markers=cap)
    parser = MarkerStreamParser(body, cap)
    out, prev = [], 0
    for cut in [*(c for c in cuts if c <= len(text)), len(text)]:
        out.append(parser.feed(text[prev:cut]))
        prev = cut
    out.append(parser.finish())
    streamed = "".join(out)
    if (streamed, parser.markers, parser.invalid) != (whole.visible, whole.markers, whole.invalid):
        raise AssertionError(f"split {cuts} of {text!r} differs from the whole text")
    check_nothing_lost(text, whole)
    again = extract_memory_markers(whole.visible)
    if again.markers or again.invalid:
        raise AssertionError(f"{whole.visible!r} (from {text!r}) parses again: {again}")


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
