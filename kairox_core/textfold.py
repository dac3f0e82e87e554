"""One comparable form of a text, for "is this a copy?" checks on untrusted input.

Text can be disguised so a copy no longer equals its source while it still reads the
same: compatibility forms (fullwidth, mathematical letters), invisible characters
(zero-width spaces and joiners, soft hyphens, a BOM, bidi controls), Cyrillic or Greek
letters that look Latin, other spacing, other case. ``fold`` undoes each, in that order:

1. NFKC;
2. every format character (Unicode category Cf, which holds the soft hyphen, ZWSP,
   ZWJ/ZWNJ, word joiner, BOM, bidi controls) and the few other invisibles (variation
   selectors, combining grapheme joiner, Hangul fillers) removed: they render as
   nothing, so removing them gives what a reader sees (``pass\\u200bword`` is
   ``password``);
3. common Cyrillic and Greek look-alikes folded to Latin, by case before case folding
   (Greek ``Ν`` looks like N, ``ν`` like v);
4. case folded, whitespace runs made one space, ends stripped.

The confusables table is small and written here on purpose: TR39's full list (as in
the ``confusable-homoglyphs`` package) maps thousands of symbols, needs its data file
at run time and offers detection, not a fold; the core stays dependency-free, NFKC
already folds the compatibility forms, and the letters below are what disguises use.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache

_OTHER_INVISIBLE = "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
_WS = re.compile(r"\s+")

# Look-alikes by case: Cyrillic, then Greek. Only letters that read as the Latin one.
_LOOKALIKES = {
    **dict(zip("АВЕКМНОРСТУХЅІЈԚԜ", "ABEKMHOPCTYXSIJQW", strict=True)),
    **dict(zip("аеорсухѕіјһԁԛԝӏ", "aeopcyxsijhdqwl", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
    **dict(zip("αικνορτυχ", "aikvoptux", strict=True)),
}


@cache
def _invisible() -> re.Pattern[str]:
    """A class of every Cf character this Python knows, plus the other invisibles
    (built once, on first use: a scan of the planes that hold them)."""
    planes = (range(0x30000), range(0xE0000, min(0xE1000, sys.maxunicode + 1)))
    cf = [chr(c) for plane in planes for c in plane if unicodedata.category(chr(c)) == "Cf"]
    chars = "".join(cf) + _OTHER_INVISIBLE
    chars += "".join(chr(c) for c in range(0xFE00, 0xFE10))  # variation selectors
    chars += "".join(chr(c) for c in range(0xE0100, 0xE01F0))
    return re.compile("[" + re.escape(chars) + "]+")


_TABLE = str.maketrans(_LOOKALIKES)


def fold(text: str) -> str:
    """The comparable form of ``text`` (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text)
    previous = None
    while not text.isascii() and text != previous:
        # to a fixed point: casefolding can yield a look-alike (U+0345 -> Greek iota)
        # the table folds, so one pass would leave a text a second fold changes
        previous = text
        text = _invisible().sub("", text).translate(_TABLE)
        text = unicodedata.normalize("NFKC", text.casefold())
    return _WS.sub(" ", text.casefold()).strip()
