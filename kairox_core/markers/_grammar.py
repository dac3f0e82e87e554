"""The ``<memory>`` marker grammar: result types, shared regexes, element validation.

Both the whole-text extractor and the streaming parser build their results from the
pieces here, so the two can only disagree about *where* an element is, never about
what a given element means.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from enum import Enum

from kairox_core.inputs import KEY_RE as _KEY_RE

DEFAULT_MAX_BODY_CHARS = 2000

# Whitespace inside tags (HTML's set). Horizontal whitespace for line clean-up.
TAG_WS = " \t\r\n\f"
_TWS = r"[ \t\r\n\f]"
CLOSER_MAX_WS = 16  # ``</memory   >``: bounded so a streaming parser's carry stays small
CLOSER_MAX_LEN = len("</memory>") + CLOSER_MAX_WS
# ``<memories ...>``/``</memories>``: a misspelling small models write (and then imitate
# from their history). Each tag alone is removed and reported, never proposed; the text
# between them stays visible (it is usually the answer). Bounded, no '<', '>' or DEFUSE
# inside, so a streaming parser's carry stays small and a join defused by the cleaner
# never reads as one.
MISSPELT_ATTRS_MAX = 200
MISSPELT = re.compile(
    r"<(?i:memories)(?:"
    + _TWS
    + r"[^<>\u2060]{0,"
    + str(MISSPELT_ATTRS_MAX)
    + r"})?>|</(?i:memories)"
    + _TWS
    + "{0,"
    + str(CLOSER_MAX_WS)
    + "}>"
)
TOKEN_MAX_LEN = len("<memories") + 1 + MISSPELT_ATTRS_MAX + 1  # the longest tag or closer

# A tag starts with ``<memory`` (any case) followed by whitespace, ``/`` or ``>``.
CANDIDATE = re.compile(r"<(?i:memory)(?=[ \t\r\n\f/>])")
# What may still grow into a candidate at the end of a stream buffer.
PARTIAL_CANDIDATE = re.compile(r"<(?i:m(?:e(?:m(?:o(?:r(?:y)?)?)?)?)?)?\Z")
# A tag start or closer still growing at the end of a stream buffer.
PARTIAL_TAG = re.compile(
    r"<(?:(?i:m(?:e(?:m(?:o(?:r(?:y|i(?:e(?:s(?:[ \t\r\n\f][^<>\u2060]{0,200})?)?)?)?)?)?)?)?)?"
    r"|/(?i:m(?:e(?:m(?:o(?:r(?:y[ \t\r\n\f]{0,16}|i(?:e(?:s[ \t\r\n\f]{0,16})?)?)?)?)?)?)?)?)\Z"
)
NESTED = re.compile(r"<(?i:memory)[ \t\r\n\f/>]")
CLOSER = re.compile(r"</(?i:memory)" + _TWS + "{0," + str(CLOSER_MAX_WS) + "}>")
# A tag removed on its own, outside any element: a stray closer or a misspelt tag.
LONE_TAG = re.compile(CLOSER.pattern + "|" + MISSPELT.pattern)
# The opening tag alone (to its first '>'); the body is found with CLOSER after it.
OPEN_TAG = re.compile(r"<(?i:memory)(?=[ \t\r\n\f/>])([^>]*)>")
_ATTR = re.compile(
    _TWS + r"*([A-Za-z_:][-A-Za-z0-9_:.]*)" + _TWS + r"*=" + _TWS + r"""*(?:"([^"]*)"|'([^']*)')"""
)
_TRAILING_WS = re.compile(_TWS + r"*")
KEY_RE = _KEY_RE  # one rule for a memory key, on every surface (kairox_core/inputs.py)
# Invisible and unbreakable: put after a '<' it stops ``<memory`` from being a tag start,
# so released or joined text shown to the user (and stored) never parses as a marker.
DEFUSE = "\u2060"  # WORD JOINER
_MAYBE_LEFT = re.compile(r"<[mM/]").search
_DEFUSABLE = re.compile(r"<(?=(?i:memory)[ \t\r\n\f/>]|/(?i:memory)|/?(?i:memories))")
# A tag start or a closer still growing: '<' then a prefix of 'memory' and its
# delimiter, or '</' then a prefix of 'memory', blanks and '>'.
_GROWING = re.compile(
    r"<(?:(?i:m(?:e(?:m(?:o(?:r(?:y[ \t\r\n\f/>]?"
    r"|i(?:e(?:s(?:[ \t\r\n\f][^<>\u2060]{0,200})?>?)?)?)?)?)?)?)?)?"
    r"|/(?i:m(?:e(?:m(?:o(?:r(?:y[ \t\r\n\f]{0,16}>?|i(?:e(?:s[ \t\r\n\f]{0,16}>?)?)?)?)?)?)?)?)?)"
)
GROWING_MAX = TOKEN_MAX_LEN  # the longest left part that may still grow (a misspelt tag)


class MemoryScope(str, Enum):
    """Where an accepted memory lives: this session, the user, or the workspace."""

    SESSION = "session"
    USER = "user"
    WORKSPACE = "workspace"

    def __str__(self) -> str:
        return self.value


class InvalidReason(str, Enum):
    """Why a complete ``<memory>`` element was rejected (compare with plain strings)."""

    MALFORMED_ATTRIBUTES = "malformed attributes"
    DUPLICATE_ATTRIBUTE = "duplicate attribute"
    NESTED = "nested marker"
    MISSING_SCOPE = "missing scope"
    UNKNOWN_SCOPE = "unknown scope"
    MISSING_KEY = "missing key"
    MALFORMED_KEY = "malformed key"
    EMPTY_BODY = "empty body"
    BODY_TOO_LONG = "body too long"
    UNTERMINATED = "unterminated"
    TOO_MANY = "too many proposals"
    STRAY_CLOSER = "stray closing tag"
    MISSPELLED = "misspelled tag"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class MemoryMarker:
    """A valid marker: a memory the model proposes. ``raw`` is the element as written."""

    scope: MemoryScope
    key: str | None
    body: str
    raw: str = ""


@dataclass(frozen=True)
class InvalidMarker:
    """A marker that was removed from the text but is never proposed."""

    reason: str
    raw: str
    detail: str = ""

    def describe(self) -> str:
        """One honest line for the person (chat, trace panel)."""
        if self.reason == InvalidReason.MISSPELLED:
            return "the model wrote a malformed memory tag (<memories>); nothing was saved"
        return f"invalid memory marker ignored: {self.reason}"


@dataclass(frozen=True)
class MarkerExtraction:
    """The visible text and the markers found in it, in order."""

    visible: str
    markers: list[MemoryMarker] = field(default_factory=list)
    invalid: list[InvalidMarker] = field(default_factory=list)


def _unescape(value: str) -> str:
    return html.unescape(value) if "&" in value else value


def decode(value: str) -> str:
    """``html.unescape`` (only call it when ``value`` holds '&'), with ``&amp;`` as the only
    entity, the usual case, done by one ``str.replace``: same result, no regex callback."""
    if value.count("&") == value.count("&amp;"):
        return value.replace("&amp;", "&")
    return html.unescape(value)


_new = object.__new__


def new_marker(scope: MemoryScope, key: str | None, body: str, raw: str) -> MemoryMarker:
    """``MemoryMarker(scope, key, body, raw)`` for the whole-text hot loop: the same
    (equal, frozen) object, filled without the frozen dataclass ``__init__`` (one
    ``object.__setattr__`` per field costs more than the rest of a marker's handling)."""
    m: MemoryMarker = _new(MemoryMarker)
    m.__dict__.update(scope=scope, key=key, body=body, raw=raw)
    return m


def parse_attributes(attrs: str) -> dict[str, str] | InvalidMarker:
    """``name="value"`` pairs (names lower-cased, values decoded), or why they are bad."""
    out: dict[str, str] = {}
    pos = 0
    n = len(attrs)
    while True:
        m = _ATTR.match(attrs, pos)
        if m is None:
            break
        name = m.group(1).lower()
        if name in out:
            return InvalidMarker(InvalidReason.DUPLICATE_ATTRIBUTE, "", f"'{name}' given twice")
        value = m.group(2) if m.group(2) is not None else m.group(3)
        out[name] = _unescape(value)
        pos = m.end()
    end = _TRAILING_WS.match(attrs, pos)
    if end is None or end.end() != n:
        bad = attrs[pos:].strip()[:40]
        return InvalidMarker(
            InvalidReason.MALFORMED_ATTRIBUTES,
            "",
            f"cannot read attributes near {bad!r}; use name=\"value\" or name='value'",
        )
    return out


SCOPES = {s.value: s for s in MemoryScope}
# The usual spellings, read in one step: scope then optional key, or key then scope.
_COMMON_ATTRS = re.compile(
    r"[ \t\r\n\f]+(?:scope=([\"'])(session|user|workspace)\1"
    r"(?:[ \t\r\n\f]+key=([\"'])([A-Za-z0-9_.:-]{1,128})\3)?"
    r"|key=([\"'])([A-Za-z0-9_.:-]{1,128})\5[ \t\r\n\f]+scope=([\"'])(session|user|workspace)\7)"
    r"[ \t\r\n\f]*"
)
# A tag start (as CANDIDATE) that, when the element is in that usual spelling with a
# body free of '<' (so nothing nested, and its first '<' starts the closer), matches the
# whole element: one search finds and reads the common case. Groups as above; 9 is the
# body, None for a bare tag start.
TAG_OR_ELEMENT = re.compile(
    r"<(?i:memory)(?:"
    + _COMMON_ATTRS.pattern
    + r">([^<]*+)</(?i:memory)"
    + _TWS
    + "{0,"
    + str(CLOSER_MAX_WS)
    + r"}>|(?=[ \t\r\n\f/>]))"
)


def build_element(
    raw: str, attrs_full: str, body_raw: str | None, max_body_chars: int
) -> MemoryMarker | InvalidMarker:
    """Judge one complete element. ``body_raw`` is None for a self-closing tag."""
    if body_raw:
        fast = _COMMON_ATTRS.fullmatch(attrs_full)
        if fast is not None and "<" not in body_raw:  # nothing nested is possible
            body = (html.unescape(body_raw) if "&" in body_raw else body_raw).strip()
            if body and len(body) <= max_body_chars:
                if fast.group(2) is not None:
                    known, key = SCOPES[fast.group(2)], fast.group(4)
                else:
                    known, key = SCOPES[fast.group(8)], fast.group(6)
                if key is not None or known is MemoryScope.SESSION:
                    return MemoryMarker(known, key, body, raw)
    attrs = attrs_full.rstrip(TAG_WS)[:-1] if body_raw is None else attrs_full
    parsed = parse_attributes(attrs)
    if isinstance(parsed, InvalidMarker):
        return InvalidMarker(parsed.reason, raw, parsed.detail)
    if body_raw is not None and NESTED.search(body_raw):
        return InvalidMarker(InvalidReason.NESTED, raw, "a <memory> tag inside another one")
    scope_value = parsed.get("scope")
    if scope_value is None:
        return InvalidMarker(
            InvalidReason.MISSING_SCOPE, raw, 'add scope="session", "user" or "workspace"'
        )
    scope = SCOPES.get(scope_value.strip().lower())
    if scope is None:
        return InvalidMarker(
            InvalidReason.UNKNOWN_SCOPE,
            raw,
            f"scope {scope_value!r} is not session, user or workspace",
        )
    key = parsed.get("key")
    if key is not None and not KEY_RE.fullmatch(key):
        return InvalidMarker(
            InvalidReason.MALFORMED_KEY,
            raw,
            f"key {key[:40]!r} must match [A-Za-z0-9_.:-]{{1,128}}",
        )
    body = _unescape(body_raw).strip() if body_raw else ""
    return judge(scope, key, body, raw, max_body_chars)


def judge(
    scope: MemoryScope, key: str | None, body: str, raw: str, max_body_chars: int
) -> MemoryMarker | InvalidMarker:
    """The last checks of an element whose attributes read well (``key`` well formed
    if given, ``body`` decoded and trimmed): the whole-text extractor's fast path
    ends here too."""
    if key is None and scope is not MemoryScope.SESSION:
        return InvalidMarker(InvalidReason.MISSING_KEY, raw, f"a {scope.value} memory needs a key")
    if not body:
        return InvalidMarker(InvalidReason.EMPTY_BODY, raw, "the memory has no text")
    if len(body) > max_body_chars:
        return InvalidMarker(
            InvalidReason.BODY_TOO_LONG,
            raw,
            f"{len(body)} characters; the limit is {max_body_chars}",
        )
    return MemoryMarker(scope, key, body, raw)


def defuse(text: str) -> str:
    """``text`` with every tag start and closer broken by ``DEFUSE``: for markup released
    as text. (Every ``<memory`` in lower case is broken, a tag start or not: invisible
    either way.)"""
    if "<" not in text:
        return text
    text = text.replace("<memory", "<" + DEFUSE + "memory")  # the usual case, fast
    if "</" in text:
        text = text.replace("</memory", "<" + DEFUSE + "/memory")
    if _MAYBE_LEFT(text):  # another spelling may be left
        return _DEFUSABLE.sub("<" + DEFUSE, text)
    return text


def grows_into_tag(left: str, first: str) -> bool:
    """Would ``first`` continue a tag start at the end of ``left`` (``"<mem" + "o"``)?"""
    lt = left.rfind("<")
    return lt >= 0 and _GROWING.fullmatch(left[lt:] + first) is not None


# Tag starts looked at in one reply (in code or not). Past it the rest of the reply is
# shown as (defused) text in one step: a reply made of tags costs search speed, not a
# Python step per tag. No honest reply comes near it.
MAX_TAGS = 1000


def tags_spent(raw: str) -> InvalidMarker:
    return InvalidMarker(
        InvalidReason.TOO_MANY, raw, f"more than {MAX_TAGS} <memory> tags; the rest is text"
    )


def stray(raw: str) -> InvalidMarker:
    return InvalidMarker(InvalidReason.STRAY_CLOSER, raw, "a </memory> that closes nothing")


def misspelt(raw: str) -> InvalidMarker:
    return InvalidMarker(
        InvalidReason.MISSPELLED, raw, "<memories> is not a marker; write <memory>"
    )


def removed_token(raw: str) -> InvalidMarker:
    """A tag removed on its own: a stray ``</memory>`` or a misspelt tag."""
    return stray(raw) if CLOSER.fullmatch(raw) else misspelt(raw)


def too_many(raw: str, cap: int) -> InvalidMarker:
    return InvalidMarker(InvalidReason.TOO_MANY, raw, f"at most {cap} proposals per reply")


def check_cap(max_markers: int | None) -> int | None:
    if max_markers is not None and (not isinstance(max_markers, int) or max_markers < 0):
        raise ValueError("max_markers must be None or an integer >= 0")
    return max_markers


def check_limit(max_body_chars: int) -> int:
    if not isinstance(max_body_chars, int) or max_body_chars < 1:
        raise ValueError("max_body_chars must be a positive integer")
    return max_body_chars
