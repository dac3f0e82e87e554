"""Coverage-guided fuzzing of the marker parsers with atheris (``nox -s fuzz``).

Each input is a reply plus split points. Checked: neither parser raises; the stream
parser under that split gives exactly the whole-text result; the visible text never
parses into a marker or an invalid element again (issue 13, items 4 and 11).

    python fuzz/fuzz_markers.py -runs=20000 -dict=fuzz/markers.dict [corpus_dir]
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from kairox_core.markers import MarkerStreamParser, extract_memory_markers


def check(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    cuts = sorted(fdp.ConsumeIntInRange(0, 4096) for _ in range(fdp.ConsumeIntInRange(0, 8)))
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    whole = extract_memory_markers(text)
    parser = MarkerStreamParser()
    out, prev = [], 0
    for cut in [*(c for c in cuts if c <= len(text)), len(text)]:
        out.append(parser.feed(text[prev:cut]))
        prev = cut
    out.append(parser.finish())
    streamed = "".join(out)
    if (streamed, parser.markers, parser.invalid) != (whole.visible, whole.markers, whole.invalid):
        raise AssertionError(f"split {cuts} of {text!r} differs from the whole text")
    again = extract_memory_markers(whole.visible)
    if again.markers or again.invalid:
        raise AssertionError(f"{whole.visible!r} (from {text!r}) parses again: {again}")


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
