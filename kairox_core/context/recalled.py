"""Recalled turns in the retrieval block: one item, packed turn by turn.

Recall (kairox_core/recall/engine.py) returns one hit per past turn of the session, best first,
with ``seq``, ``speaker`` and ``date`` in its metadata. The assembler skips the turns
its history holds, then adds the rest one at a time (alternating with the workspace and
knowledge-base hits) while the retrieval share has room. All chosen turns render as a
single item, chronological, ``<speaker>: <text>`` per line under a date line for each
day: a header per turn would cost a third of a typical turn, and a date per turn more.
The seqs are in the trace (one entry per turn).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from kairox_core.context.counting import ProfileCounter
from kairox_core.context.rendering import item_unit, neutralise
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.usecache import memo_by_text, text_and_result

SOURCE = "recall"
DOC_TYPE = "conversation"
HEADER = "recalled turns of this conversation"
LINE_TOKENS = "line_tokens"  # a turn's metadata: its line's count (``line_stamp``)


def turn_seq(hit: RetrievalHit) -> int | None:
    seq = hit.metadata.get("seq")
    return seq if isinstance(seq, int) else None


@dataclass(frozen=True)
class DeferredTurns(RetrievalHit):
    """Not a turn: the mark of a search that skipped the session's newest turns, not
    indexed yet (``unindexed``: their seqs), because the history surely holds them
    (the finished turn, searched by the next one right away). The assembler's plan
    settles it (``settle_deferred``) once it knows which turns its history holds: all
    of them held, the mark goes and the hits stand; else the plan names the mark and
    its caller runs ``search()`` (``exact``: index first, search again; I/O, so off the
    event loop) and plans again, the new hits replacing those that came with the mark
    (``hits``). That search runs once: ``settled`` keeps its hits for a reassembly and
    for the turn's taint check (``recalled_turns``), which must see every recalled turn
    the context can hold."""

    unindexed: tuple[int, ...] = ()
    hits: tuple[RetrievalHit, ...] = ()
    exact: Callable[[], Sequence[RetrievalHit]] | None = None
    settled: list[RetrievalHit] = field(default_factory=list, compare=False, repr=False)
    searched: list[bool] = field(default_factory=list, compare=False, repr=False)

    def search(self) -> list[RetrievalHit]:
        """Do the search again, indexed first (once; the I/O runs on the caller's thread)."""
        if not self.searched:
            self.settled[:] = self.exact() if self.exact is not None else self.hits
            self.searched.append(True)
        return self.settled


def deferred_mark(
    hits: Sequence[RetrievalHit],
    unindexed: Sequence[int],
    exact: Callable[[], Sequence[RetrievalHit]],
) -> DeferredTurns:
    """The mark that goes with ``hits`` (found without the ``unindexed`` turns)."""
    return DeferredTurns(
        "", 0.0, SOURCE, "deferred", unindexed=tuple(unindexed), hits=tuple(hits), exact=exact
    )


def settle_deferred(
    recalled: Sequence[RetrievalHit], held: Collection[int]
) -> tuple[list[RetrievalHit], tuple[DeferredTurns, ...]]:
    """``recalled`` without its marks, and the marks still to search. A mark whose
    unindexed turns are all in ``held`` (seqs of the history units surely in the
    context) goes, its hits stand; one whose search was done (``search``) has its hits
    replaced by that search's; any other is returned, its hits left as they are (the
    plan is not final until it is searched). Pure: nothing is searched here."""
    marks = [h for h in recalled if isinstance(h, DeferredTurns)]
    if not marks:
        return list(recalled), ()
    out = [h for h in recalled if not isinstance(h, DeferredTurns)]
    unsettled: list[DeferredTurns] = []
    for mark in marks:
        if mark.exact is None or all(s in held for s in mark.unindexed):
            continue
        if not mark.searched:
            unsettled.append(mark)
            continue
        gone = {id(h) for h in mark.hits}
        at = next((i for i, h in enumerate(out) if id(h) in gone), len(out))
        out = [h for h in out if id(h) not in gone]
        out[at:at] = mark.settled
    return out, tuple(unsettled)


async def search_deferred(marks: Sequence[DeferredTurns]) -> None:
    """``search()`` each mark in a worker thread (indexing, embedding, SQLite), off the
    event loop: what the session does for a plan's ``unsettled`` marks."""
    from kairox_core.retrieval.threads import run_blocking

    for mark in marks:
        await run_blocking(mark.search, name="kairox-recall")


def recalled_turns(recalled: Sequence[RetrievalHit]) -> list[RetrievalHit]:
    """Every recalled turn that can be in the context: ``recalled`` without its marks,
    plus the hits of any mark searched again (``DeferredTurns.search``)."""
    out: list[RetrievalHit] = []
    for h in recalled:
        if isinstance(h, DeferredTurns):
            out.extend(h.settled)
        else:
            out.append(h)
    return out


def turn_line(hit: RetrievalHit) -> str:
    return line_of(hit.metadata.get("speaker"), hit.text)


def line_of(speaker: object, text: str) -> str:
    return f"{speaker}: {text.strip()}"


def line_stamp(pc: ProfileCounter, speaker: object, text: str) -> str:
    """What recall stores in a turn's metadata (``LINE_TOKENS``) when it indexes it: the
    count of the turn's line as ``TurnPack.cost_of`` counts it (``ProfileCounter.stamp``).
    A line recalled later is then not encoded on the turn, unless it differs (another
    chunk, another encoding, another format), which the stamp's digest tells."""
    return pc.stamp(counted_line(line_of(speaker, text)))


def render_turns(turns: list[RetrievalHit]) -> str:
    """The item: turns in seq order, a ``YYYY-MM-DD:`` line whenever the day changes."""
    lines: list[str] = []
    day = None
    for hit in sorted(turns, key=lambda h: turn_seq(h) or 0):
        if hit.metadata.get("date") != day:
            day = hit.metadata.get("date")
            lines.append(f"{day}:")
        lines.append(turn_line(hit))
    return item_unit(HEADER, "\n".join(lines))


@dataclass
class TurnPack:
    """The recalled turns chosen so far, with an estimate of their item's raw tokens
    (sum of the parts; ``unit`` gives the exact text to count)."""

    counter: ProfileCounter
    turns: list[RetrievalHit] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    days: dict[str, int] = field(default_factory=dict)  # day -> turns chosen on it
    _unit: tuple[tuple[RetrievalHit, ...], str] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def estimate(self) -> int:
        return sum(self.costs)

    def cost_of(self, hit: RetrievalHit) -> int:
        """Raw tokens ``hit`` would add: its line, a date line for a new day, and the
        item's header for the first turn."""
        pc = self.counter
        n = pc.known_raw_count(_neutral_line(turn_line(hit)), hit.metadata.get(LINE_TOKENS))
        if str(hit.metadata.get("date")) not in self.days:
            n += pc.raw_count(f"{hit.metadata.get('date')}:\n")
        if not self.turns:
            n += pc.raw_count(item_unit(HEADER, ""))
        return n

    def add(self, hit: RetrievalHit, cost: int) -> None:
        self.turns.append(hit)
        self.costs.append(cost)
        day = str(hit.metadata.get("date"))
        self.days[day] = self.days.get(day, 0) + 1

    def pop(self) -> RetrievalHit:
        """Take back the last (lowest-ranked) turn added."""
        hit = self.turns.pop()
        self.costs.pop()
        day = str(hit.metadata.get("date"))
        self.days[day] -= 1
        if not self.days[day]:
            del self.days[day]
        return hit

    def discard(self, seqs: set[int]) -> int:
        """Take back the turns whose seq is in ``seqs``; returns how many."""
        keep = [
            (h, c) for h, c in zip(self.turns, self.costs, strict=True) if turn_seq(h) not in seqs
        ]
        dropped = len(self.turns) - len(keep)
        if dropped:
            self.turns, self.costs, self.days = [], [], {}
            for hit, cost in keep:
                self.add(hit, cost)
        return dropped

    def unit(self) -> str:
        """The item's text, rendered once per set of turns (the assembler asks for it
        to count, to check and to emit)."""
        memo = self._unit
        if (
            memo is None
            or len(memo[0]) != len(self.turns)
            or any(a is not b for a, b in zip(memo[0], self.turns, strict=True))
        ):
            memo = self._unit = (tuple(self.turns), render_turns(self.turns))
        return memo[1]


def counted_line(line: str) -> str:
    """A turn's line as the pack counts it: escaped (``neutralise``), with its newline."""
    return neutralise(line) + "\n"


# Remembered for the turns: the same turns come back turn after turn, and ``neutralise``
# (regexes) cost more than the cached count. Indexing calls ``counted_line`` itself, so
# a bulk index does not push the turns' lines out.
_neutral_line = memo_by_text(8192, 4_000_000, 16_384, text_and_result)(counted_line)


__all__ = [
    "DOC_TYPE",
    "HEADER",
    "LINE_TOKENS",
    "SOURCE",
    "DeferredTurns",
    "TurnPack",
    "counted_line",
    "deferred_mark",
    "line_of",
    "line_stamp",
    "render_turns",
    "search_deferred",
    "settle_deferred",
    "turn_line",
    "turn_seq",
]
