"""What engines hand the assembler: ``Contribution`` objects, by layer, for one request.

These are the engine seam's values the context layer reads; they live here, below
both, so the assembler never names ``kairox_core.engines`` (which re-exports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kairox_core.retrieval.base import RetrievalHit

if TYPE_CHECKING:
    from kairox_core.context.longterm import LongTermContext

# Where a contribution goes in the assembled context (see ContextAssembler):
# "system"    text appended to the system message (mandatory, small: a long-term block)
# "mandatory" its own block right after the system message, always present (context
#             packs); too big for the budget: the turn is refused
# "recalled"  hits (past turns) competing with retrieval hits in the retrieval share
# "longterm"  active context packs (mandatory) and chunks recalled by similarity (a
#             block fitted within [longterm] share, never a reason to refuse a turn),
#             as plain data in ``longterm``
ContributionLayer = Literal["system", "mandatory", "recalled", "longterm"]


@dataclass(frozen=True)
class AssemblyRequest:
    """What is being assembled: the prompt, the profile, and the history cut-off
    (``before_seq``: a turn's own prompt seq when it is reassembled after a tool call)."""

    prompt: str
    profile: str
    before_seq: int | None = None


@dataclass(frozen=True)
class Contribution:
    """Context an engine adds to one assembly, labelled for the trace.

    ``engine`` names who contributed; ``label`` names the block (``mandatory``) or the
    trace item; ``text`` is the content (``system``/``mandatory``), ``hits`` the turns
    (``recalled``), ``longterm`` the packs and chunks (``longterm``: the assembler fits
    and traces them); ``notes`` go to the trace of the layer the contribution lands in."""

    engine: str
    layer: ContributionLayer
    label: str = ""
    text: str = ""
    hits: tuple[RetrievalHit, ...] = ()
    notes: tuple[str, ...] = ()
    longterm: LongTermContext | None = None


__all__ = ["AssemblyRequest", "Contribution", "ContributionLayer"]
