"""The compactor's extension point for other engines (recall indexes compacted turns).

After a ``CompactionSummary`` is stored, the compactor awaits every callable in
``Compactor.on_compacted`` with ``(session, summary, originals)``: the stored summary
event (its ``seq`` set) and the original conversation events it replaced, in seq order
(earlier summaries it folded are not in ``originals``: their turns were handed over when
they were compacted). A callback runs while the session is still held by the compaction,
so it must not call back into the session's queued methods (``compact``, ``pin_fact``,
...); an exception in a callback is recorded as a note on the result, never undoes the
compaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kairox_core.events import CompactionSummary, Event

if TYPE_CHECKING:
    from kairox_core.session import Session

OnCompacted = Callable[["Session", CompactionSummary, Sequence[Event]], Awaitable[None] | None]

__all__ = ["OnCompacted"]
