"""Memory tags copied from the system prompt: never the person's words, never proposed.

The built-in system prompt teaches the protocol with a worked example ("Remember that
I work night shifts." -> a ``work-hours`` tag). In the trial conversation the default
0.5B model, asked "Note that I prefer answers in short bullet points.", recited the
prompt and restating gave back the example's tag, ``Works night shifts``: a card
asking the person to approve a fact they never told (issue 28). A tag whose body is
text of the system prompt the model was given, while the person's message holds
little of it, is copied: it is left out of the proposals and said so; the turn then
counts as one that saved nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kairox_core.markers import MemoryMarker

_WORD = re.compile(r"[^\W_]+")
# a body's words worth comparing: not the glue that any two sentences share
_GLUE_WORDS = """a an the and or of to in on at for is are was be i my me you your our we it
this that with as by from"""
_GLUE = frozenset(_GLUE_WORDS.split())
COPIED = "copied from the system prompt, not said by the person: {keys}"


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def is_copied(marker: MemoryMarker, message: str, system_prompt: str) -> bool:
    """True when ``marker``'s body, word for word, is text of ``system_prompt`` and the
    person's ``message`` holds fewer than half of the body's content words (two or
    more of them)."""
    body = _words(marker.body)
    content = [w for w in body if w not in _GLUE]
    if len(content) < 2:  # one word found in a long prompt is as likely a coincidence
        return False
    if f" {' '.join(body)} " not in f" {' '.join(_words(system_prompt))} ":
        return False
    said = set(_words(message))
    return sum(w in said for w in content) * 2 < len(content)


def split_copied(
    markers: Sequence[MemoryMarker], message: str, system_prompt: str
) -> tuple[list[MemoryMarker], list[MemoryMarker]]:
    """``markers`` as (kept, copied), each in its order."""
    kept: list[MemoryMarker] = []
    copied: list[MemoryMarker] = []
    for marker in markers:
        (copied if is_copied(marker, message, system_prompt) else kept).append(marker)
    return kept, copied


def copied_note(copied: Sequence[MemoryMarker]) -> str:
    """The one line the event, the trace and the front ends show."""
    return COPIED.format(keys=", ".join(m.key or m.scope.value for m in copied))
