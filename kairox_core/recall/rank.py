"""Reordering recalled turns before they are fitted: speaker, content and neighbours.

Recall (recall.py) ranks each past turn on its own against the prompt, and the
assembler fits them in that order. Three cheap, model-free adjustments act on the
ranking (each off at weight 0; ``[recall]`` keys):

- **Speaker** (``speaker_prior``): when the prompt names some of the
  conversation's speakers but not all, their turns' scores are multiplied by ``1 +
  prior``. "What attributes describe John?" is answered by what John said: on LoCoMo,
  of the evidence turns of questions that name one speaker, 97% are that speaker's
  (449 of 463), against about half of all turns. A turn's speaker is the name of a
  transcript line (``"John: ..."``, a label of one to three capitalised words before
  the first colon) or else its ``speaker`` metadata (``user``, ``assistant``).

- **Content** (``content_prior``): a turn's score is scaled by ``1 + prior x
  (c - 0.5)``, ``c`` its content words (not stop words, three letters or more) over
  ``content_words``, at most 1. "Sounds nice, spending time together is
  important!" matches every question about family a little; the turns that state
  facts have more words that are not filler (LoCoMo's evidence turns average 42 tokens,
  its turns 31), so among turns matching alike the one saying more comes first.
- **Neighbours** (``neighbour_weight``): evidence often spans adjacent turns
  (a question and its answer, a story told over two replies). Each turn's score gets
  ``weight x`` the best score of the turn just before or after it in the conversation,
  so the neighbour of a strong hit can outrank a weak hit elsewhere; a neighbour that
  was not retrieved at all joins the list (its event is read, not searched).

Measured on LoCoMo (docs/recall.md): the speaker prior lifts every category, open-domain
most (the inference questions whose evidence no word of the question finds); the content
prior helps, neighbours trade
open-domain and multi-hop recall for temporal; keyword pseudo-relevance feedback and
MMR diversity were tried too and left out (feedback lost recall at every weight, and
diversity never changed which turns fit).

Everything here is pure over the hits and a callable the engine supplies, so it is
tested without an index.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kairox_core.context.recalled import SOURCE, turn_seq
from kairox_core.retrieval.base import RetrievalHit

if TYPE_CHECKING:
    from kairox_core.config import RecallSection
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import EngineSession as Session
    from kairox_core.events import Event
    from kairox_core.retrieval.documents import DocumentInput

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Function words and conversational filler: they say nothing about what a turn is about.
_STOP = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also really so much like get got going gonna go went yeah yes oh wow hey hi
    thanks thank great good awesome cool amazing lot lots glad sounds sound know think feel
    feeling love one things thing something time way make made let us well even still always
    never ever new back see saw look looks looking say said tell told want wanted need sure
    keep kept take took right bit"""
STOP_WORDS = frozenset(_STOP.split())


@dataclass(frozen=True)
class RankSettings:
    """The ``[recall]`` ranking keys (see the module docstring)."""

    content_prior: float = 0.0
    content_words: int = 20
    neighbour_weight: float = 0.0
    speaker_prior: float = 0.0

    @classmethod
    def of(cls, section: RecallSection) -> RankSettings:
        """From the ``[recall]`` section."""
        return cls(
            content_prior=section.content_prior,
            content_words=section.content_words,
            neighbour_weight=section.neighbour_weight,
            speaker_prior=section.speaker_prior,
        )

    @property
    def active(self) -> bool:
        return bool(self.content_prior or self.neighbour_weight or self.speaker_prior)


# seqs -> for each, the conversation turns just before and after it (None: none there),
# as hits shaped like recall's (``seq`` in metadata)
Neighbours = Callable[[Sequence[int]], Mapping[int, tuple[RetrievalHit | None, ...]]]


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _seq_key(hit: RetrievalHit) -> int:
    seq = turn_seq(hit)
    return seq if seq is not None else -1


def propagate(
    hits: Sequence[RetrievalHit],
    neighbours: Mapping[int, tuple[RetrievalHit | None, ...]],
    weight: float,
) -> list[RetrievalHit]:
    """Each turn scored ``own + weight x best neighbour's own`` (a turn that was not
    retrieved has own 0 and joins only through a neighbour listed in ``neighbours``);
    best first, ties by input order."""
    own = {_seq_key(h): h.score for h in hits}
    by_seq = {_seq_key(h): h for h in hits}
    for around in neighbours.values():
        for n in around:
            if n is not None:
                by_seq.setdefault(_seq_key(n), n)
    best_next: dict[int, float] = {}
    for seq, around in neighbours.items():
        for n in around:
            if n is None:
                continue
            key = _seq_key(n)
            # the neighbour relation is symmetric: seq's score lifts n, n's lifts seq
            best_next[key] = max(best_next.get(key, 0.0), own.get(seq, 0.0))
            best_next[seq] = max(best_next.get(seq, 0.0), own.get(key, 0.0))
    score = {s: own.get(s, 0.0) + weight * best_next.get(s, 0.0) for s in by_seq}
    order = list(by_seq)
    order.sort(key=lambda s: -score[s])
    return [replace(by_seq[s], score=score[s]) for s in order]


@functools.lru_cache(maxsize=8192)
def content_words(text: str) -> int:
    """Words that may carry a fact: not stop words, three letters or more. Remembered:
    the same turns come back prompt after prompt, and counting re-tokenizes each."""
    return sum(1 for w in words(text) if len(w) >= 3 and w not in STOP_WORDS)


def weigh_content(hits: Sequence[RetrievalHit], prior: float, full: int) -> list[RetrievalHit]:
    """Each score times ``1 + prior x (min(content words / full, 1) - 0.5)``; best
    first, ties by input order (a negative factor is floored at 0)."""
    scored = []
    for i, h in enumerate(hits):
        c = min(content_words(h.text) / max(full, 1), 1.0)
        scored.append((max(0.0, h.score * (1 + prior * (c - 0.5))), i, h))
    scored.sort(key=lambda t: (-t[0], t[1]))
    # built directly: ``dataclasses.replace`` re-validates every field, per hit
    return [
        RetrievalHit(h.text, s, h.source, h.doc_id, h.metadata, h.chunk_id) for s, _, h in scored
    ]


# a transcript line's speaker: one to three capitalised words before the first colon
_LABEL = re.compile(r"\s*([^\W\d_][\w.'-]*(?: [^\W\d_][\w.'-]*){0,2}):\s")


@functools.lru_cache(maxsize=8192)
def _label(head: str) -> str | None:
    """Keyed by the text's first 64 characters (all it reads), not the whole turn."""
    m = _LABEL.match(head)
    return m.group(1) if m and m.group(1)[:1].isupper() else None


def speaker_of(hit: RetrievalHit) -> str:
    """Who said the turn: a transcript line's name (``"John: ..."``), else the
    ``speaker`` metadata (``user``, ``assistant``, ``tool <name>``)."""
    return _label(hit.text[:64]) or str(hit.metadata.get("speaker") or "")


def _names(speaker: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(speaker) + r"(?!\w)", re.IGNORECASE)


def weigh_speakers(hits: Sequence[RetrievalHit], prompt: str, prior: float) -> list[RetrievalHit]:
    """Each score times ``1 + prior`` for a turn whose speaker the prompt names (a whole
    word, any case), when it names some of the speakers among ``hits`` but not all (all
    or none says nothing about who); best first, ties by input order."""
    speakers = [speaker_of(h) for h in hits]
    named = {s for s in set(speakers) if s and _names(s).search(prompt)}
    if prior <= 0 or not named or len(named) == len(set(speakers)):
        return list(hits)
    scored = [
        (h.score * (1 + prior) if who in named else h.score, i, h)
        for i, (h, who) in enumerate(zip(hits, speakers, strict=True))
    ]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [
        RetrievalHit(h.text, s, h.source, h.doc_id, h.metadata, h.chunk_id) for s, _, h in scored
    ]


NEIGHBOUR_WINDOW = 8  # seqs read either side of a hit for its neighbours (one read each)


def neighbour_reader(
    read: Callable[[int, int], Sequence[Event]],
    to_hit: Callable[[Event], RetrievalHit | None],
    window: int = NEIGHBOUR_WINDOW,
) -> Callable[[Sequence[int]], dict[int, tuple[RetrievalHit | None, ...]]]:
    """``Neighbours`` over an event store: ``read(first, last)`` returns the
    conversation events with seqs in [first, last], in order; ``to_hit`` makes one a
    hit. Overlapping windows are read once; a neighbour further than ``window`` seqs
    away (a reply streamed in many deltas) is not found, which only loses a lift."""

    def neighbours(seqs: Sequence[int]) -> dict[int, tuple[RetrievalHit | None, ...]]:
        spans: list[list[int]] = []
        for seq in sorted(set(seqs)):
            lo, hi = max(0, seq - window), seq + window
            if spans and lo <= spans[-1][1] + 1:
                spans[-1][1] = max(spans[-1][1], hi)
            else:
                spans.append([lo, hi])
        events: list[Event] = []
        for lo, hi in spans:
            events.extend(read(lo, hi))
        order = [e.seq or 0 for e in events]  # stored events: every seq is set
        at = {seq: i for i, seq in enumerate(order)}
        out: dict[int, tuple[RetrievalHit | None, ...]] = {}
        for seq in seqs:
            i = at.get(seq)
            if i is None:
                continue
            around = []
            for j in (i - 1, i + 1):
                if 0 <= j < len(events) and abs(order[j] - seq) <= window:
                    around.append(to_hit(events[j]))
                else:
                    around.append(None)
            out[seq] = tuple(around)
        return out

    return neighbours


def arrange(
    hits: Sequence[RetrievalHit],
    settings: RankSettings,
    neighbours: Neighbours,
    *,
    limit: int,
    prompt: str = "",
) -> list[RetrievalHit]:
    """The recalled turns reordered by ``settings`` (neighbours, speakers named in
    ``prompt``, then content), at most ``limit``. With every weight 0 they come back as
    they were. Neighbours are read for the best quarter of the list only (one event read
    per window, not per turn)."""
    out = list(hits)
    if not settings.active or not out:
        return out[:limit]
    if settings.neighbour_weight > 0:
        seqs = [s for s in (turn_seq(h) for h in out[: max(1, limit // 4)]) if s is not None]
        out = propagate(out, neighbours(seqs), settings.neighbour_weight)
    if settings.speaker_prior > 0 and prompt:
        out = weigh_speakers(out, prompt, settings.speaker_prior)
    if settings.content_prior > 0:
        out = weigh_content(out, settings.content_prior, settings.content_words)
    return out[:limit]


def arrange_recalled(
    ctx: EngineContext,
    session: Session,
    hits: list[RetrievalHit],
    before_seq: int | None,
    turn_document: Callable[[Event], DocumentInput | None],
    prompt: str = "",
) -> list[RetrievalHit]:
    """``arrange`` for ``Recall.turns`` (``prompt``: the search's): the settings from
    ``[recall]``, neighbours
    read from the event store (only turns below ``before_seq``) and made hits as recall
    indexes them (``turn_document``, passed in: engine.py imports this module)."""
    settings = RankSettings.of(ctx.config.recall)
    if not settings.active or not hits:
        return hits
    from kairox_core.store.event_store import CONVERSATION_TYPES

    def read(first: int, last: int) -> Sequence[Event]:
        return ctx.events.read(session.id, first_seq=first, last_seq=last, types=CONVERSATION_TYPES)

    def to_hit(event: Event) -> RetrievalHit | None:
        doc = turn_document(event)
        if doc is None or (before_seq is not None and (event.seq or 0) >= before_seq):
            return None
        return RetrievalHit(doc.text, 0.0, SOURCE, doc.doc_id, dict(doc.metadata))

    return arrange(
        hits,
        settings,
        neighbour_reader(read, to_hit),
        limit=ctx.config.recall.k,
        prompt=prompt,
    )


__all__ = [
    "NEIGHBOUR_WINDOW",
    "STOP_WORDS",
    "Neighbours",
    "RankSettings",
    "arrange",
    "arrange_recalled",
    "content_words",
    "neighbour_reader",
    "propagate",
    "speaker_of",
    "weigh_content",
    "weigh_speakers",
    "words",
]
