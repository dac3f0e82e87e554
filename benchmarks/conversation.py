"""The multi-turn mode of ``benchmarks/protocol.py``: one conversation, scored turn by turn.

``protocol.py``'s single prompts each start a fresh session, so they never see what a
conversation teaches a small model: once "Noted." sits in its history, it answers
"Noted." with no tag (issue 28). Here one session of 30 turns mixes 10 requests to
remember a fact, 10 ordinary questions and 10 questions about a fact told earlier,
through the chat engine the front ends use (``ChatEngine.run_turn``: the built-in
prompt, history, memories, the "nothing was saved" flag). After each turn a person
decides the cards (``decide``): the careful one approves a right proposal and rejects
any other; the fixer also approves a proposal holding the fact under a wrong scope,
with the scope corrected on the card. The session is then resumed (a new engine on
the same database and session id) and the 10 recall questions are asked again.

Scored with the project's own parser (the events the turn raised):

- tags right: a remember turn raised a memory with an expected scope, a key, and a
  body holding the fact; the scope is the proposal's as stored, after the scope check
  (``[memory] scope_check``) when it ran. ``written_ok`` counts the same with the scope
  the model wrote in its tag, ``moved`` the proposals the check moved;
- untagged: a remember turn raised no memory at all (the person was told something
  was kept, or nothing); ``unflagged`` of them got no "Nothing was saved" flag;
- false tags: memories raised on turns that asked for none (plain and recall turns);
- recall: the visible answer holds the fact, in the conversation and after resuming;
- noted: turns that asked for nothing (plain and recall) answered with a claim to have
  kept something ("Noted."): the question went unanswered.

Nothing here needs a model: ``converse`` takes any provider (the tests script one),
``score`` takes the recorded turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kairox_core.chat.engine import claims_kept

Kind = Literal["remember", "plain", "recall", "resumed"]


@dataclass(frozen=True)
class Fact:
    """A fact the person asks to remember, and the question that asks for it later."""

    request: str
    scopes: frozenset[str]  # the scopes a right tag may have
    word: str  # the stored body must hold it (lowercase)
    question: str
    answer: str  # the visible answer must hold it (lowercase)


def _fact(request: str, scope: str, word: str, question: str, answer: str = "") -> Fact:
    return Fact(request, frozenset({scope}), word, question, answer or word)


FACTS = (
    _fact("Remember that my dog is called Biscuit.", "user", "biscuit", "What is my dog called?"),
    _fact("Please remember that I live in Porto.", "user", "porto", "Where do I live?"),
    _fact(
        "Remember this: the project uses PostgreSQL 16 as its database.",
        "workspace",
        "postgres",
        "Which database does this project use?",
    ),
    _fact(
        "Keep in mind that I am allergic to peanuts.", "user", "peanut", "What am I allergic to?"
    ),
    _fact(
        "Remember that our team deploys this repository every Friday.",
        "workspace",
        "friday",
        "On which day do we deploy?",
    ),
    _fact("Note that my sister is called Mira.", "user", "mira", "What is my sister's name?"),
    _fact(
        "Remember: this repo's main branch is called trunk.",
        "workspace",
        "trunk",
        "What is the main branch of this repo called?",
    ),
    _fact("Don't forget that I take my coffee black.", "user", "black", "How do I take my coffee?"),
    _fact(
        "Remember that the staging server is staging.example.com.",
        "workspace",
        "staging",
        "What is the staging server's address?",
    ),
    _fact(
        "Please remember that my favourite colour is green.",
        "user",
        "green",
        "What is my favourite colour?",
    ),
)
PLAIN = (
    "What is 2 + 2?",
    "Name three primary colours.",
    "How do I reverse a list in Python?",
    "What is the capital of Japan?",
    "Translate 'good morning' into French.",
    "What does HTTP stand for?",
    "What is 7 times 6?",
    "Give me a synonym for happy.",
    "Explain in one sentence what a database index is.",
    "What is the boiling point of water in Celsius?",
)


def script() -> list[tuple[Kind, int]]:
    """The 30 turns in order: a request, a plain question, then the previous fact's
    recall question (two turns and a reply later), so each recall reads history."""
    turns: list[tuple[Kind, int]] = []
    for i in range(len(FACTS)):
        turns += [("remember", i), ("plain", i)]
        if i:
            turns.append(("recall", i - 1))
    turns.append(("recall", len(FACTS) - 1))
    return turns


Person = Literal["careful", "fixer", "editor", "later"]
PERSONS: tuple[Person, ...] = ("careful", "fixer", "editor", "later")


@dataclass(frozen=True)
class Conversation:
    """One scripted conversation: its facts, plain questions, turns in order, and the
    person who decides its cards unless told otherwise."""

    name: str
    facts: tuple[Fact, ...]
    plain: tuple[str, ...]
    turns: tuple[tuple[Kind, int], ...]
    person: Person = "careful"

    def prompt_of(self, kind: Kind, index: int) -> str:
        if kind == "remember":
            return self.facts[index].request
        if kind == "plain":
            return self.plain[index]
        return self.facts[index].question


BENCHMARK = Conversation("benchmark", FACTS, PLAIN, tuple(script()))

# The new-user trial's conversation (docs/results.md, issue 28), held out: its prompts and their
# order are ``prompts/trial_conversation.txt``; what a right tag and a right answer
# hold is written here. Cards wait (``later``), as they did in the trial.
TRIAL_FILE = Path(__file__).parent / "prompts" / "trial_conversation.txt"
TRIAL_FACTS = (
    _fact(
        "Please remember that I am allergic to peanuts.", "user", "peanut", "What am I allergic to?"
    ),
    _fact(
        "Remember that my sister's name is Ingrid.", "user", "ingrid", "What is my sister's name?"
    ),
    _fact(
        "Remember that this project uses PostgreSQL 18 for the team store.",
        "workspace",
        "postgres",
        "What database does this project use for the team store?",
    ),
    _fact(
        "Note that I prefer answers in short bullet points.",
        "user",
        "bullet",
        "How do I like my answers formatted?",
    ),
    _fact(
        "Remember that our deploy day is Thursday.",
        "workspace",
        "thursday",
        "What day do we deploy?",
    ),
    _fact("Remember that I live in Porto.", "user", "porto", "Where do I live?"),
    _fact(
        "Remember that my favourite editor is Helix.", "user", "helix", "Which editor do I prefer?"
    ),
    _fact(
        "Remember that the staging server is called vega.",
        "workspace",
        "vega",
        "What is the staging server called?",
    ),
)


def conversation_from(name: str, lines: Sequence[str], facts: Sequence[Fact]) -> Conversation:
    """The conversation ``lines`` say, in their order: a fact's request or question is a
    remember or recall turn, any other line a plain question. Every fact must be both
    asked to remember and asked about, the request first."""
    requests = {f.request: i for i, f in enumerate(facts)}
    questions = {f.question: i for i, f in enumerate(facts)}
    turns: list[tuple[Kind, int]] = []
    plain: list[str] = []
    for line in (raw.strip() for raw in lines):
        if not line:
            continue
        if line in requests:
            turns.append(("remember", requests[line]))
        elif line in questions:
            turns.append(("recall", questions[line]))
        else:
            turns.append(("plain", len(plain)))
            plain.append(line)
    for i in range(len(facts)):
        if ("remember", i) not in turns or ("recall", i) not in turns:
            raise ValueError(f"{name}: fact {i} is not both told and asked about")
        if turns.index(("remember", i)) > turns.index(("recall", i)):
            raise ValueError(f"{name}: fact {i} is asked about before it is told")
    return Conversation(name, tuple(facts), tuple(plain), tuple(turns), "later")


def trial() -> Conversation:
    return conversation_from("trial", TRIAL_FILE.read_text().splitlines(), TRIAL_FACTS)


def conversations(which: str) -> list[Conversation]:
    """``benchmark``, ``trial`` or ``both``."""
    sets = {"benchmark": [BENCHMARK], "trial": [trial()], "both": [BENCHMARK, trial()]}
    if which not in sets:
        raise ValueError(f"unknown conversation set {which!r}: benchmark, trial or both")
    return sets[which]


def prompt_of(kind: Kind, index: int, conv: Conversation = BENCHMARK) -> str:
    return conv.prompt_of(kind, index)


@dataclass
class TurnRecord:
    """One turn as the benchmark saw it: the visible reply and what it raised."""

    kind: Kind
    index: int
    prompt: str
    text: str  # what the person saw
    tags: list[tuple[str, str | None, str]] = field(default_factory=list)  # scope, key, body
    invalid: int = 0  # malformed tags the parser refused
    flagged: bool = False  # the chat said "Nothing was saved"
    # ``tags`` with the scope the model wrote (None: as stored, no scope check moved one)
    written: list[tuple[str, str | None, str]] | None = None
    checks: list[str] = field(default_factory=list)  # the scope check's notes, if it ran
    dropped: int = 0  # tags the request check dropped (the message asked for no memory)
    answered_again: bool = False  # the request check had the turn answered again
    restated: bool = False  # the tags are the model's for the message alone (restate_tags)

    @property
    def as_written(self) -> list[tuple[str, str | None, str]]:
        return self.tags if self.written is None else self.written


def right_tag(
    record: TurnRecord, *, as_written: bool = False, conv: Conversation = BENCHMARK
) -> bool:
    """A memory with an expected scope, a key, and the fact in its body (``as_written``:
    judged by the scope the model wrote, not the one stored after the scope check)."""
    fact = conv.facts[record.index]
    return any(
        scope in fact.scopes and bool(key) and fact.word in body.lower()
        for scope, key, body in (record.as_written if as_written else record.tags)
    )


def answered(record: TurnRecord, conv: Conversation = BENCHMARK) -> bool:
    return conv.facts[record.index].answer in record.text.lower()


def score(records: Sequence[TurnRecord], conv: Conversation = BENCHMARK) -> dict[str, Any]:
    """The conversation's figures (see the module docstring)."""
    remember = [r for r in records if r.kind == "remember"]
    untagged = [r for r in remember if not r.tags]
    asked_nothing = [r for r in records if r.kind != "remember"]
    recall = [r for r in records if r.kind == "recall"]
    resumed = [r for r in records if r.kind == "resumed"]
    return {
        "tags_ok": sum(right_tag(r, conv=conv) for r in remember),
        "tags_asked": len(remember),
        "written_ok": sum(right_tag(r, as_written=True, conv=conv) for r in remember),
        "moved": sum(
            w[0] != t[0] for r in records for w, t in zip(r.as_written, r.tags, strict=True)
        ),
        "check_failed": sum("scope check failed" in n for r in records for n in r.checks),
        "wrong_scope": sum(
            bool(r.tags) and all(s not in conv.facts[r.index].scopes for s, _, _ in r.tags)
            for r in remember
        ),
        "untagged": len(untagged),
        "unflagged": sum(not r.flagged for r in untagged),
        "false_tags": sum(len(r.tags) for r in asked_nothing),
        "false_tags_plain": sum(len(r.tags) for r in asked_nothing if r.kind == "plain"),
        "invalid_tags": sum(r.invalid for r in records),
        "false_flags": sum(r.flagged for r in records if r.kind != "remember" or r.tags),
        "noted": sum(claims_kept(r.text) for r in asked_nothing),
        "recall_ok": sum(answered(r, conv) for r in recall),
        "recall_asked": len(recall),
        "resumed_ok": sum(answered(r, conv) for r in resumed),
        "resumed_asked": len(resumed),
        "dropped": sum(r.dropped for r in records),
        "dropped_remember": sum(r.dropped for r in remember),
        "answered_again": sum(r.answered_again for r in records),
        "restated": sum(r.restated for r in records),
    }


_ASKING = re.compile(
    r"^(?:please )?(?:remember|keep in mind|note|don't forget)(?: this)?:?(?: that)?\s+",
    re.IGNORECASE,
)


def told(fact: Fact) -> str:
    """The fact as the person said it, without the asking ("I take my coffee black.")."""
    said = _ASKING.sub("", fact.request)
    return said[:1].upper() + said[1:]


def decide(
    engine: Any,
    record: TurnRecord,
    proposals: Sequence[Any],
    person: Person = "careful",
    conv: Conversation = BENCHMARK,
) -> None:
    """A person at the cards. ``careful`` approves a right proposal and rejects the
    rest; ``fixer`` also approves a remember turn's proposal that holds the fact under
    a wrong scope (or with no key), with the scope and key corrected on the card
    (``kairox memory approve --scope``, the card's edit); ``editor`` also rewrites a
    body that lost the fact to the fact as told (the card's edit), so every tag the
    person keeps is right; ``later`` decides nothing while the conversation runs (the
    cards wait, as when a person chats on and reviews them afterwards). The score
    still counts the tag as it was proposed (after the scope check, when it ran;
    ``written_ok``: as the model wrote it), not as fixed."""
    if person == "later":
        return
    fact = conv.facts[record.index] if record.kind != "plain" else None
    for p in proposals:
        if record.kind == "remember" and right_tag(
            TurnRecord(record.kind, record.index, record.prompt, "", [(p.scope, p.key, p.body)]),
            conv=conv,
        ):
            engine.approve(p.proposal_id)
        elif record.kind == "remember" and (
            fact is not None
            and (person == "editor" or (person == "fixer" and _holds_fact(fact, p.body)))
        ):
            scope = p.scope if p.scope in fact.scopes else min(fact.scopes)
            body = p.body if _holds_fact(fact, p.body) else told(fact)
            engine.approve(p.proposal_id, body, scope=scope, key=_key_for(engine, scope, p, fact))
        else:
            engine.reject(p.proposal_id, reason="benchmark: not the fact asked for")


def _key_for(engine: Any, scope: str, p: Any, fact: Fact) -> str:
    """The model's key, unless it has none or it names another memory already kept
    (a person would not overwrite that fact): then one of the person's own."""
    if (
        p.key
        and engine.kx.memories.get(
            scope, p.key, workspace_id=engine.session.workspace_id, session_id=engine.session_id
        )
        is None
    ):
        return str(p.key)
    return fact.word


def _holds_fact(fact: Fact, body: str) -> bool:
    return fact.word in body.lower()


async def _ask(
    engine: Any, kind: Kind, index: int, person: Person, conv: Conversation
) -> TurnRecord:
    prompt = conv.prompt_of("recall" if kind == "resumed" else kind, index)
    outcome = await engine.run_turn(prompt, lambda _: None)
    if outcome.error:
        raise RuntimeError(f"turn {prompt!r} failed: {outcome.error}")
    raised = [*outcome.proposals, *outcome.accepted]
    record = TurnRecord(
        kind,
        index,
        prompt,
        outcome.text,
        [(e.scope, e.key, e.body) for e in raised],
        len(outcome.invalid),
        bool(outcome.unsaved),
        # a session memory taken at once was written as session: no check moves into it
        written=[(getattr(e, "model_scope", None) or e.scope, e.key, e.body) for e in raised],
        checks=[v.note for v in outcome.scope_checks],
        dropped=0 if outcome.restated else len(outcome.dropped),
        answered_again=outcome.answered_again,
        restated=outcome.restated,
    )
    decide(engine, record, outcome.proposals, person, conv)
    return record


async def converse(
    open_engine: Callable[[str | None], Any],
    *,
    on_turn: Callable[[TurnRecord], None] | None = None,
    person: Person | None = None,
    conv: Conversation = BENCHMARK,
) -> list[TurnRecord]:
    """Run the scripted conversation, then resume it and ask the recall questions again.

    ``open_engine(session_id)`` returns a ``ChatEngine`` (None: a new session); the
    caller closes nothing: each engine is closed here. ``person`` None: the
    conversation's own (``conv.person``)."""
    who = conv.person if person is None else person
    records: list[TurnRecord] = []
    engine = open_engine(None)
    try:
        session_id = engine.session_id
        for kind, index in conv.turns:
            records.append(await _ask(engine, kind, index, who, conv))
            if on_turn is not None:
                on_turn(records[-1])
    finally:
        await engine.close()
    engine = open_engine(session_id)
    try:
        for index in range(len(conv.facts)):
            records.append(await _ask(engine, "resumed", index, who, conv))
            if on_turn is not None:
                on_turn(records[-1])
    finally:
        await engine.close()
    return records


def chat_config(
    *,
    history_tags: bool,
    reserve: int,
    system_prompt: str | None = None,
    history_decided: bool | None = None,
    history_rejected: str | None = None,
    scope_check: bool | None = None,
    request_check: bool | None = None,
    restate_tags: bool | None = None,
    untagged: str | None = None,
) -> Any:
    """The configuration the conversation runs under: the defaults, but for the
    history switches, the scope, request and restate checks (None: the default), the
    reply length and (to compare wordings) the system prompt."""
    from kairox_core.config import parse_config

    memory: dict[str, Any] = {"history_tags": history_tags}
    if scope_check is not None:
        memory["scope_check"] = scope_check
    if request_check is not None:
        memory["request_check"] = request_check
    if restate_tags is not None:
        memory["restate_tags"] = restate_tags
    if untagged is not None:
        memory["request_check_untagged"] = untagged
    raw: dict[str, Any] = {
        "profiles": {"default": {"context_window": 8192, "reserve": reserve}},
        "memory": memory,
    }
    if history_decided is not None:
        raw["memory"]["history_decided"] = history_decided
    if history_rejected is not None:
        raw["memory"]["history_rejected"] = history_rejected
    if system_prompt:
        raw["kairox"] = {"system_prompt": system_prompt}
    return parse_config(raw)


def engine_opener(
    config: Any,
    database: Path,
    provider_for: Callable[[], Any],
    *,
    request_check: bool | None = None,
    restate_tags: bool | None = None,
) -> Callable[[str | None], Any]:
    """``open_engine`` for ``converse``: the front ends' ``ChatEngine.open`` path
    (``request_check``, ``restate_tags``: run them even for a scripted model; None: the
    setting)."""
    from kairox_core.chat.engine import ChatEngine

    def open_engine(session_id: str | None) -> Any:
        return ChatEngine.open(
            config,
            database,
            workspace="bench" if session_id is None else None,
            session_id=session_id,
            provider=provider_for(),
            request_check=request_check,
            restate_tags=restate_tags,
        )

    return open_engine


def records_json(records: Sequence[TurnRecord]) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]
