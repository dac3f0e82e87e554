"""What every entry checks in what a person or a client sends: one set of rules for the
Python API, the CLI, the web API and the MCP server, so a value refused on one surface
is refused on all of them, with the same message.

- **Text** must be valid Unicode: a lone surrogate (``"\\ud800"`` in JSON, or a byte
  that is not UTF-8 on a command line, which Python turns into ``U+DC80-U+DCFF``)
  cannot be stored or sent to a model, so a person's text carrying one is refused
  (``check_text``). Text Kairox did not get from a person (a model's reply, a tool's
  result) has them replaced with U+FFFD instead (``clean_text``): it is not theirs to fix.
- **Memory keys**: ``[A-Za-z0-9_.:-]{1,128}``, the rule the ``<memory key=...>`` marker
  grammar has always applied (no spaces, no markup, not empty).
- **Session and workspace ids**: ``[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}``. No ``/``, no
  spaces, and not starting with ``_``, which is reserved for Kairox's own maintenance
  sessions (``_memory:user``, ``_packs``, ``_longterm:...``).
- **JSON values** (web bodies): no ``NaN``/``Infinity``, integers within 64 bits (what
  the databases store), strings valid Unicode (``json_problem``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from kairox_core.errors import KairoxUserError

MIN_INT64, MAX_INT64 = -(2**63), 2**63 - 1
KEY_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class InvalidInputError(KairoxUserError):
    """A value that no surface accepts (the message says which and how to fix it)."""


def surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, None when it is valid text."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def check_text(text: str, what: str) -> str:
    """``text`` unchanged, or ``InvalidInputError`` naming ``what`` and the position."""
    at = surrogate_at(text)
    if at is None:
        return text
    code = ord(text[at])
    hint = (
        f"(on a command line: byte 0x{code - 0xDC00:02X}, which is not UTF-8)"
        if 0xDC80 <= code <= 0xDCFF
        else "(half of a UTF-16 pair without the other half)"
    )
    raise InvalidInputError(
        f"{what} is not valid Unicode text: a lone surrogate U+{code:04X} at character {at} "
        f"{hint}; send the text as UTF-8"
    )


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (for text from a model or a
    tool, which the person cannot fix)."""
    return text if surrogate_at(text) is None else _SURROGATE.sub("\ufffd", text)


def check_key(key: str, what: str = "key") -> str:
    """A memory key as the marker grammar allows it."""
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        raise InvalidInputError(
            f"{what} {_shown(key)} is not valid: use 1 to 128 letters, digits and _ . : - "
            f"(no spaces or markup), e.g. 'editor' or 'deploy.day'"
        )
    return key


def check_id(value: str, what: str) -> str:
    """A session or workspace id (``what`` names which)."""
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise InvalidInputError(
            f"{what} {_shown(value)} is not valid: use 1 to 128 letters, digits and _ . : -, "
            f"starting with a letter or digit (ids starting with '_' are Kairox's own)"
        )
    return value


def check_session_id(value: str) -> str:
    return check_id(value, "session id")


def check_workspace_id(value: str) -> str:
    return check_id(value, "workspace id")


def json_problem(value: Any, where: str = "$") -> str | None:
    """What makes a decoded JSON value unusable (a non-finite number, an integer beyond
    64 bits, a lone surrogate in a string or a key), with its path; None when it is fine."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if surrogate_at(item) is not None:
                return f"{path}: a string with a lone surrogate is not valid Unicode text"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not MIN_INT64 <= item <= MAX_INT64:
                return f"{path}: the integer {_shown(item)} does not fit in 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path}: {item} is not a number JSON allows (finite numbers only)"
        elif isinstance(item, dict):
            for k, v in item.items():
                if surrogate_at(k) is not None:
                    return f"{path}: a key with a lone surrogate is not valid Unicode text"
                stack.append((v, f"{path}.{k}"))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
