"""The built-in ``extractive`` compaction strategy: deterministic, no model.

It keeps the sentences most worth remembering, verbatim, one per line and labelled by
speaker, in their original order, within the token target:

* a sentence scores one point for each of: a name (a capitalised word after the
  first), a number, a date, a decision ("decided", "we will", "agreed", ...), an open
  task ("TODO", "need to", "will ...", ...), and two points for an approved memory key;
  lines of earlier summaries being folded get a point for surviving once already;
* the best-scoring sentences (earlier first on ties) are taken until the target is
  reached; sentences that score nothing are dropped, unless nothing scores at all, when
  the first sentence of each user message is kept instead;
* the result is redacted (compaction/redaction.py) like every summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kairox_core.capabilities import StrategyCapabilities
from kairox_core.compaction.base import CompactionOutput, CompactionRequest, HistoryItem
from kairox_core.compaction.redaction import redact_secrets
from kairox_core.tokens import TokenCounter

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_NAME = re.compile(r"\s[A-Z][a-zA-Z]+")
_NUMBER = re.compile(r"\d")
_DATE = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|today|tonight|tomorrow|yesterday|next (?:week|month|"
    r"year)|last (?:week|month|year))\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:decided|decide|decision|we will|we'll|agreed|agree|let's|chose|chosen|settled on|"
    r"going with|go with|approved)\b",
    re.I,
)
_TASK = re.compile(
    r"\b(?:todo|to-do|need to|needs to|must|have to|has to|should|will|won't|remind|"
    r"follow up|follow-up|action item|deadline|due|pending|open question)\b",
    re.I,
)
_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool"}


@dataclass(frozen=True)
class _Sentence:
    index: int
    line: str
    score: int
    first_of_user: bool


def _key_terms(keys: list[str]) -> re.Pattern[str] | None:
    terms = {t.lower() for key in keys for t in re.split(r"[._:\-]+", key) if len(t) >= 3}
    if not terms:
        return None
    return re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, terms))) + r")\b", re.I)


def score_sentence(sentence: str, keys: re.Pattern[str] | None = None) -> int:
    """How much a sentence is worth keeping (0: nothing that compaction must keep)."""
    score = sum(1 for pat in (_NAME, _NUMBER, _DATE, _DECISION, _TASK) if pat.search(sentence))
    if keys is not None and keys.search(sentence):
        score += 2
    return score


def _label(item: HistoryItem) -> str:
    if item.role == "tool" and item.name:
        return f"Tool ({item.name}): "
    label = _LABELS.get(item.role)
    return f"{label}: " if label else ""


def _sentences(items: list[HistoryItem], keys: re.Pattern[str] | None) -> list[_Sentence]:
    out: list[_Sentence] = []
    for item in items:
        label = _label(item)
        first = item.role == "user"
        for part in _SENTENCES.split(item.text):
            text = " ".join(part.split())
            if not text:
                continue
            score = score_sentence(text, keys) + (1 if item.role == "summary" else 0)
            out.append(_Sentence(len(out), label + text, score, first))
            first = False
    return out


def extract_summary(
    items: list[HistoryItem],
    target_tokens: int,
    counter: TokenCounter,
    memory_keys: list[str] | None = None,
) -> str:
    """The extractive summary of ``items`` in at most ``target_tokens`` tokens."""
    sentences = _sentences(items, _key_terms(memory_keys or []))
    pool = [s for s in sentences if s.score > 0] or [s for s in sentences if s.first_of_user]
    ranked = sorted(pool, key=lambda s: (-s.score, s.index))
    kept: list[_Sentence] = []
    used = 0
    for s in ranked:
        cost = counter.count(s.line) + 1
        if used + cost <= target_tokens:
            kept.append(s)
            used += cost
    kept.sort(key=lambda s: s.index)
    text = redact_secrets("\n".join(s.line for s in kept))
    while kept and counter.count(text) > target_tokens:  # joins can cost a little more
        worst = min(kept, key=lambda s: (s.score, -s.index))
        kept.remove(worst)
        text = redact_secrets("\n".join(s.line for s in kept))
    return text


class ExtractiveStrategy:
    """``[compaction] strategy = "extractive"`` (the default)."""

    name = "extractive"
    capabilities = StrategyCapabilities()

    def __init__(self, **_options: Any) -> None:
        pass

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        items = request.items
        counter = request.counter
        text = extract_summary(items, request.target_tokens, counter, request.memory_keys)
        tokens_in = sum(counter.count(i.text) for i in items)
        return CompactionOutput(text, None, tokens_in, counter.count(text), None, self.name)

    compact = summarize  # the compactor's older name for the same call


def create(**options: Any) -> ExtractiveStrategy:
    """The factory registered as ``extractive``."""
    return ExtractiveStrategy(**options)
