"""Words that may ask to remember: which untagged replies the request check looks at.

Asking the model about every untagged reply (``[memory] request_check_untagged =
"always"``) costs one short call per turn; asking about none left "Don't forget that
the team uses Python 3.12." answered with no tag and no flag in the new-user trial
(issue 28). A request to remember nearly always says so in a handful of words, so the
check runs on untagged replies only when the message holds one of them ("cued", the
default). The cue only decides whether to ask: the model's one-word verdict still
decides whether it was a request, so "Do you remember my dog's name?" costs one
call and raises nothing.
"""

from __future__ import annotations

import re

# the phrases of a request to remember, whole words, case ignored; a bare "note" or
# "memo" is not one ("write a note to my landlord"), "note that" and "please note" are
_CUE = re.compile(
    r"\b(?:"
    r"remember|memori[sz]e"
    r"|(?:make|take|keep)\s+(?:a\s+)?note|note\s+(?:that|this|down|it)|(?:please|pls)\s+note"
    r"|(?:keep|bear)\s+(?:that\s+|this\s+|it\s+)?in\s+mind"
    r"|(?:don'?t|do\s+not|never)\s+forget"
    r"|(?:save|store|record|log|jot\s+down|write\s+down)\s+(?:this|that|it)"
    r"|for\s+(?:future\s+)?reference|for\s+the\s+record|from\s+now\s+on|going\s+forward"
    r"|file\s+(?:this|that|it)(?:\s+away)?"
    r")\b"
    r"|^\W*note\s*[:,-]",  # "Note: ..." opening the message
    re.IGNORECASE,
)


def may_ask_to_remember(message: str) -> bool:
    """True when ``message`` holds a word of a request to remember (``_CUE``): the
    request check is then asked about an untagged reply. False costs nothing."""
    return _CUE.search(message) is not None


def says_remember(message: str) -> bool:
    """A request in words, not a question: cued (``may_ask_to_remember``) and not ending
    in "?". The request check's "other" does not drop such a message's tags: asked
    alone, the model called "Save this: the production database is named orders_prod."
    and "Note that every pull request here needs two approvals" other (issue 28), while
    the questions it must catch ("What is the capital of Australia?") hold no cue."""
    return may_ask_to_remember(message) and not message.rstrip().endswith("?")
