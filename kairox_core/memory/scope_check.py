"""The scope check: a second, history-free look at the scope of one proposed memory.

Inside a conversation a small model copies the scope of the tags it wrote earlier and
files personal facts under ``workspace`` or ``session`` (issue 28), while on the fact
alone it chooses much better. So before a marker becomes a proposal, the model is asked
one short question about that fact alone, at temperature 0, with a few tokens.

The question is "personal or project?" with two worked examples of each (the 0.5B
model never answered "user" when asked for a scope name). Rules that keep approval
meaningful: the check may move a memory to a scope a person approves (``session`` to
``user``/``workspace``, ``workspace`` to ``user``), never into ``session``,
which is accepted without a person: no answer means session, and
``ApprovalService.route`` refuses such a move too. An answer that is not exactly one
of the two words, an error or a timeout keeps the model's scope, and the verdict says
so (``note``): the proposal event carries it, the trace and the card show it. Taint is
decided apart from the scope and is never changed here. Nor does it move ``user`` to
``workspace``: that would share what the model kept for the person with the project,
and on single prompts it was the check's only mistake (docs/results.md, 2 December).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from kairox_core.markers import MemoryMarker, MemoryScope
from kairox_core.providers.base import Message, ModelProvider

SCOPE_CHECK_MAX_TOKENS = 4  # one word
# Asked as "personal or project": the 0.5B default model never answered "user" to a
# user/workspace/session question (issue 28, docs/results.md), and session is never a target.
_SYSTEM = (
    "Say whether a fact someone asked you to remember is about their own life (name, "
    "home, family, pets, health, tastes, habits, schedule) or about their project (code, "
    "repository, team, servers, deploys). Answer with one word: personal or project."
)
# worked examples, none from the benchmark's facts: two of each, alternating
_EXAMPLES = (
    ("Remember that I have two cats.", "personal"),
    ("Remember that the backend is written in Go.", "project"),
    ("Note that my birthday is in June.", "personal"),
    ("Keep in mind that we release on the first of every month.", "project"),
)
_ANSWERS = {"personal": MemoryScope.USER, "project": MemoryScope.WORKSPACE}


@dataclass(frozen=True)
class ScopeVerdict:
    """What the check did to one marker: ``scope`` is the one the proposal gets."""

    model_scope: MemoryScope  # what the model wrote in its tag
    scope: MemoryScope
    answer: str | None  # the check's raw answer; None when the call failed
    note: str  # one line for the trace and the card

    @property
    def moved(self) -> bool:
        return self.scope != self.model_scope

    @property
    def agreed(self) -> bool:
        """The check named the model's own scope (nothing to tell a person)."""
        return self.answer is not None and parse_answer(self.answer) == self.model_scope


ScopeCheck = Callable[[MemoryMarker], Awaitable[ScopeVerdict]]


def parse_answer(answer: str) -> MemoryScope | None:
    """The scope ``answer`` names, strictly: the whole answer is "personal" (user) or
    "project" (workspace), case, quotes, backticks and a final full stop aside; else
    None. Nothing parses to session."""
    word = answer.strip().strip("`'\"*").rstrip(".").strip().lower()
    return _ANSWERS.get(word)


def decide(model_scope: MemoryScope, answer: str | None, error: str | None = None) -> ScopeVerdict:
    """The verdict for a marker the model scoped ``model_scope``, given the check's
    ``answer`` (or the ``error`` that stopped it)."""
    was = model_scope.value
    if error is not None or answer is None:
        why = error or "no answer"
        return ScopeVerdict(
            model_scope, model_scope, None, f"scope check failed ({why}); kept {was}"
        )
    chosen = parse_answer(answer)
    if chosen is None:
        return ScopeVerdict(
            model_scope,
            model_scope,
            answer,
            f"scope check answer {answer.strip()[:40]!r} unreadable; kept {was}",
        )
    if chosen == model_scope:
        return ScopeVerdict(model_scope, model_scope, answer, f"scope check agreed: {was}")
    if model_scope == MemoryScope.USER:
        return ScopeVerdict(
            model_scope,
            model_scope,
            answer,
            "scope check chose workspace; kept user (a check never moves what the model "
            "kept for the person into the shared workspace)",
        )
    return ScopeVerdict(
        model_scope, chosen, answer, f"the model wrote {was}; the scope check chose {chosen.value}"
    )


def question(marker: MemoryMarker) -> list[Message]:
    """The check's whole input: the fact alone (its key and body as the model wrote
    them), after the worked examples; no history, not the chat's system prompt."""
    messages: list[Message] = [{"role": "system", "content": _SYSTEM}]
    for said, answer in _EXAMPLES:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": answer}]
    fact = f"{marker.key}: {marker.body.strip()}" if marker.key else marker.body.strip()
    messages.append({"role": "user", "content": f"Remember: {fact}"})
    return messages


def applied(marker: MemoryMarker, verdict: ScopeVerdict) -> MemoryMarker:
    """``marker`` as it is proposed after ``verdict``: its new scope, and a key made
    from its text when a keyless session memory moves to a scope that needs one (the
    card lets a person change it)."""
    if not verdict.moved:
        return marker
    key = marker.key or "-".join(re.findall(r"[a-z0-9]+", marker.body.lower())[:4])[:64]
    return replace(marker, scope=verdict.scope, key=key or "note")


def provider_check(provider: ModelProvider, *, timeout: float) -> ScopeCheck:
    """A ``ScopeCheck`` asking ``provider``; an error or a timeout becomes a verdict that
    keeps the model's scope and says why (never raised, never silent)."""

    async def check(marker: MemoryMarker) -> ScopeVerdict:
        try:
            result = await asyncio.wait_for(
                provider.complete(
                    question(marker), max_tokens=SCOPE_CHECK_MAX_TOKENS, temperature=0.0
                ),
                timeout,
            )
        except TimeoutError:
            return decide(marker.scope, None, f"no answer within {timeout:g} s")
        except Exception as exc:  # a provider error of any kind keeps the scope, said
            return decide(marker.scope, None, f"{type(exc).__name__}: {exc}"[:200])
        return decide(marker.scope, result.text)

    return check
