"""The multi-turn mode of benchmarks/protocol.py (issue 28, item 2): its scoring, offline,
and the whole conversation driven through the chat engine by a scripted model."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.providers.scripted import ScriptedProvider

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_conversation", ROOT / "benchmarks" / "conversation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


conv = _load()
Record = conv.TurnRecord


def test_the_script_has_thirty_turns_and_asks_each_fact_after_it_was_told() -> None:
    turns = conv.script()
    assert len(turns) == 30
    for kind in ("remember", "plain", "recall"):
        assert sorted(i for k, i in turns if k == kind) == list(range(10))
    for i in range(10):
        assert turns.index(("remember", i)) < turns.index(("recall", i))


def test_a_right_tag_needs_the_expected_scope_a_key_and_the_fact() -> None:
    prompt = conv.FACTS[0].request
    assert conv.right_tag(Record("remember", 0, prompt, "Noted.", [("user", "dog", "Biscuit")]))
    assert not conv.right_tag(Record("remember", 0, prompt, "", [("workspace", "dog", "Biscuit")]))
    assert not conv.right_tag(Record("remember", 0, prompt, "", [("session", None, "Biscuit")]))
    assert not conv.right_tag(Record("remember", 0, prompt, "", [("user", "", "Biscuit")]))
    assert not conv.right_tag(Record("remember", 0, prompt, "", [("user", "dog", "a dog")]))
    # one right tag among others is right
    tags = [("session", None, "x"), ("user", "dog-name", "The dog is Biscuit")]
    assert conv.right_tag(Record("remember", 0, prompt, "", tags))


def test_score_counts_each_kind_of_failure_apart() -> None:
    records = [
        Record("remember", 0, "", "Noted.", [("user", "dog", "Biscuit")]),
        Record("remember", 1, "", "Noted.", [("workspace", "city", "Porto")]),  # wrong scope
        Record("remember", 2, "", "Noted.", [], flagged=True),  # untagged, flagged
        Record("remember", 3, "", "Sure thing!", []),  # untagged, not flagged
        Record("plain", 0, "", "4.", [("user", "sum", "2 + 2 = 4")]),  # false tag
        Record("plain", 1, "", "Red.", [], flagged=True),  # a flag where none was due
        Record("recall", 0, "", "Your dog is Biscuit.", [("user", "dog", "Biscuit")]),
        Record("recall", 1, "", "I don't know.", []),
        Record("recall", 2, "", "Noted.", []),  # a question answered "Noted."
        Record("resumed", 0, "", "BISCUIT", []),
        Record("resumed", 1, "", "Lisbon", []),
    ]
    s = conv.score(records)
    assert s["noted"] == 1  # "Noted." on a remember turn is not counted
    assert (s["tags_ok"], s["tags_asked"], s["wrong_scope"]) == (1, 4, 1)
    assert (s["untagged"], s["unflagged"]) == (2, 1)
    assert (s["false_tags"], s["false_tags_plain"], s["false_flags"]) == (2, 1, 1)
    assert (s["recall_ok"], s["recall_asked"]) == (1, 3)
    assert (s["resumed_ok"], s["resumed_asked"]) == (1, 2)


kinds = st.sampled_from(["remember", "plain", "recall", "resumed"])
tags = st.lists(
    st.tuples(
        st.sampled_from(["user", "workspace", "session"]),
        st.one_of(st.none(), st.text(max_size=5)),
        st.text(max_size=20),
    ),
    max_size=3,
)
records_strategy = st.lists(
    st.builds(
        lambda kind, index, text, tags, flagged: Record(kind, index, "", text, tags, 0, flagged),
        kinds,
        st.integers(0, 9),
        st.text(max_size=20),
        tags,
        st.booleans(),
    ),
    max_size=40,
)


@given(records_strategy)
def test_score_bounds_hold_for_any_turns(records: list[Any]) -> None:
    s = conv.score(records)
    assert 0 <= s["tags_ok"] + s["untagged"] <= s["tags_asked"]
    assert 0 <= s["wrong_scope"] <= s["tags_asked"] - s["untagged"] - s["tags_ok"]
    assert 0 <= s["unflagged"] <= s["untagged"]
    assert s["recall_ok"] <= s["recall_asked"] and s["resumed_ok"] <= s["resumed_asked"]
    assert s["false_tags_plain"] <= s["false_tags"]
    assert s["false_tags"] == sum(len(r.tags) for r in records if r.kind != "remember")
    assert 0 <= s["noted"] <= sum(r.kind != "remember" for r in records)


# --- the conversation, through the chat engine, with a scripted model ------------------

SCOPE = {0: "user", 2: "workspace", 3: "user", 4: "workspace"}  # the others: see below


def fake_model(messages: Sequence[dict[str, Any]]) -> str:
    """Right tags for most facts, one in the wrong scope, one "Noted." without a tag,
    one false tag; a recall question is answered only when its fact is in the context
    the engine assembled (memories or history), never from the script."""
    prompt = messages[-1]["content"]
    earlier = " ".join(str(m["content"]) for m in messages[:-1]).lower()
    for i, fact in enumerate(conv.FACTS):
        if prompt == fact.request:
            if i == 1:
                return f'Noted. <memory scope="workspace" key="home">{fact.request}</memory>'
            if i == 5:
                return "Noted."  # no tag: the chat must flag it
            scope = sorted(fact.scopes)[0]
            return f'Noted. <memory scope="{scope}" key="fact-{i}">{fact.request}</memory>'
        if prompt == fact.question:
            return f"It is {fact.answer}." if fact.answer in earlier else "I don't know."
    if prompt == conv.PLAIN[0]:
        return '4. <memory scope="user" key="sum">2 + 2 = 4</memory>'
    return "An answer."


async def test_the_conversation_runs_through_the_chat_engine_and_scores(
    tmp_path: Path, kairox_home: Path
) -> None:
    config = conv.chat_config(history_tags=True, reserve=64)
    providers: list[ScriptedProvider] = []

    def provider() -> ScriptedProvider:
        providers.append(ScriptedProvider(fake_model))
        return providers[-1]

    seen: list[Any] = []
    records = await conv.converse(
        conv.engine_opener(config, tmp_path / "k.db", provider), on_turn=seen.append
    )
    assert seen == records and len(records) == 40
    s = conv.score(records)
    assert (s["tags_ok"], s["wrong_scope"], s["untagged"], s["unflagged"]) == (8, 1, 1, 0)
    assert (s["false_tags"], s["false_tags_plain"], s["false_flags"]) == (1, 1, 0)
    assert (s["recall_ok"], s["resumed_ok"]) == (10, 10)  # every fact was in the history
    assert len(providers) == 2  # the resumed half is a new engine on the same session
    resumed = providers[1].calls[0]
    assert any(conv.FACTS[0].request in str(m["content"]) for m in resumed)  # history read back
    # the person approved the right cards only: they are memories after resuming
    memories = [str(m["content"]) for m in resumed if "<kairox:memories" in str(m["content"])]
    block = memories[-1].split("<kairox:memories", 2)[-1]  # past the system prompt's mention
    assert conv.FACTS[0].request in block and conv.FACTS[1].request not in block


@pytest.mark.parametrize("history_tags", [False, True])
def test_chat_config_sets_the_history_switch_and_the_reply_length(history_tags: bool) -> None:
    config = conv.chat_config(history_tags=history_tags, reserve=80, system_prompt="Be brief.")
    assert config.memory.history_tags is history_tags
    assert config.resolve_profile(None)[1].reserve == 80
    assert config.kairox.system_prompt == "Be brief."


async def test_the_fixer_corrects_the_scope_and_the_score_keeps_the_models_tag(
    tmp_path: Path, kairox_home: Path
) -> None:
    """The fixer approves the wrong-scope card with the scope corrected; the score still
    counts the model's tag (wrong), and with history_decided the model then reads
    the corrected tag in its history."""
    config = conv.chat_config(history_tags=True, reserve=64, history_decided=True)
    assert config.memory.history_decided is True
    providers: list[ScriptedProvider] = []

    def provider() -> ScriptedProvider:
        providers.append(ScriptedProvider(fake_model))
        return providers[-1]

    records = await conv.converse(
        conv.engine_opener(config, tmp_path / "k.db", provider), person="fixer"
    )
    s = conv.score(records)
    assert (s["tags_ok"], s["wrong_scope"], s["false_tags"]) == (8, 1, 1)
    resumed = providers[1].calls[0]
    memories = [str(m["content"]) for m in resumed if "<kairox:memories" in str(m["content"])]
    block = memories[-1].split("<kairox:memories", 2)[-1]
    assert conv.FACTS[1].request in block  # the corrected card became a memory
    home = f'<memory scope="user" key="home">{conv.FACTS[1].request}</memory>'
    replies = [str(m["content"]) for m in resumed if m["role"] == "assistant"]
    assert f"Noted. {home}" in replies  # read back as the person fixed it
    assert not any('key="sum"' in r for r in replies)  # the rejected false tag: a note


def test_told_is_the_fact_without_the_asking() -> None:
    assert [conv.told(f) for f in conv.FACTS[:3]] == [
        "My dog is called Biscuit.",
        "I live in Porto.",
        "The project uses PostgreSQL 16 as its database.",
    ]


async def test_the_editor_rewrites_a_lost_fact_under_a_key_of_its_own(
    tmp_path: Path, kairox_home: Path
) -> None:
    """The model files the Friday deploys under the previous fact's key and body; the
    editor keeps the card with the fact as told and a key that overwrites nothing."""
    friday = conv.FACTS[4]

    def model(messages: Sequence[dict[str, Any]]) -> str:
        if messages[-1]["content"] == friday.request:
            return 'Noted. <memory scope="workspace" key="fact-2">PostgreSQL 16</memory>'
        return fake_model(messages)

    config = conv.chat_config(history_tags=True, reserve=64, history_decided=True)
    providers: list[ScriptedProvider] = []

    def provider() -> ScriptedProvider:
        providers.append(ScriptedProvider(model))
        return providers[-1]

    records = await conv.converse(
        conv.engine_opener(config, tmp_path / "k.db", provider), person="editor"
    )
    assert conv.score(records)["tags_ok"] == 7  # the model's own tags, as written
    replies = [str(m["content"]) for m in providers[1].calls[0] if m["role"] == "assistant"]
    edited = f'<memory scope="workspace" key="friday">{conv.told(friday)}</memory>'
    assert f"Noted. {edited}" in replies
    database = f'<memory scope="workspace" key="fact-2">{conv.FACTS[2].request}</memory>'
    assert f"Noted. {database}" in replies  # the earlier fact kept its key


def test_score_counts_the_stored_scope_and_the_written_one_apart() -> None:
    prompt = conv.FACTS[1].request  # Porto: a user fact
    moved = Record(
        "remember",
        1,
        prompt,
        "Noted.",
        [("user", "city", "Porto")],
        written=[("workspace", "city", "Porto")],
        checks=["the model wrote workspace; the scope check chose user"],
    )
    kept = Record("remember", 0, conv.FACTS[0].request, "Noted.", [("user", "dog", "Biscuit")])
    failed = Record(
        "remember",
        2,
        conv.FACTS[2].request,
        "Noted.",
        [("user", "db", "PostgreSQL 16")],
        checks=["scope check failed (TimeoutError); kept user"],
    )
    s = conv.score([moved, kept, failed])
    assert (s["tags_ok"], s["written_ok"], s["moved"], s["check_failed"]) == (2, 1, 1, 1)


async def test_the_later_person_leaves_every_card_waiting(
    tmp_path: Path, kairox_home: Path
) -> None:
    """``later`` decides nothing during the conversation: every user and workspace
    card the model raised is still pending at the end, and the score is the same."""
    config = conv.chat_config(history_tags=True, reserve=64)
    opener = conv.engine_opener(config, tmp_path / "k.db", lambda: ScriptedProvider(fake_model))
    records = await conv.converse(opener, person="later")
    raised = [t for r in records for t in r.tags if t[0] in ("user", "workspace")]
    engine = opener(None)
    try:
        pending = engine.kx.approvals.pending()
        assert len(pending) == len(raised) > 0
    finally:
        await engine.close()
    assert conv.score(records)["tags_ok"] == 8


# --- the held-out trial conversation (prompts/trial_conversation.txt) ------------------


def test_the_trial_set_is_the_prompts_file_in_its_order() -> None:
    trial = conv.trial()
    lines = [line for line in conv.TRIAL_FILE.read_text().splitlines() if line.strip()]
    assert [trial.prompt_of(k, i) for k, i in trial.turns] == lines
    kinds = [k for k, _ in trial.turns]
    assert (kinds.count("remember"), kinds.count("plain"), kinds.count("recall")) == (8, 9, 8)
    assert trial.person == "later" and conv.BENCHMARK.person == "careful"
    assert [c.name for c in conv.conversations("both")] == ["benchmark", "trial"]
    with pytest.raises(ValueError, match="unknown conversation set"):
        conv.conversations("held-out")


def test_a_trial_fact_never_asked_about_or_asked_first_is_refused() -> None:
    facts = conv.TRIAL_FACTS[:1]
    with pytest.raises(ValueError, match="not both told and asked"):
        conv.conversation_from("t", [facts[0].request, "What is 2 + 2?"], facts)
    with pytest.raises(ValueError, match="asked about before it is told"):
        conv.conversation_from("t", [facts[0].question, facts[0].request], facts)


def test_the_trial_is_scored_by_its_own_facts() -> None:
    trial = conv.trial()
    ingrid = conv.TRIAL_FACTS[1]
    records = [
        Record("remember", 1, ingrid.request, "Noted.", [("user", "sister", "Sister: Ingrid")]),
        Record("remember", 2, "", "Noted.", [("user", "db", "PostgreSQL 18")]),  # wrong scope
        Record("remember", 4, "", "Noted.", [], flagged=True),  # untagged, flagged
        Record("plain", 0, "", "Noted.", [("user", "capital", "Canberra")], dropped=0),
        Record("plain", 1, "", "366.", [], dropped=1, answered_again=True),
        Record("recall", 1, "", "Your sister is Ingrid.", []),
        Record("recall", 4, "", "Noted.", []),
        Record("resumed", 1, "", "INGRID", []),
    ]
    s = conv.score(records, trial)
    assert (s["tags_ok"], s["tags_asked"], s["wrong_scope"]) == (1, 3, 1)
    assert (s["untagged"], s["unflagged"], s["false_tags"]) == (1, 0, 1)
    assert (s["recall_ok"], s["recall_asked"], s["resumed_ok"]) == (1, 2, 1)
    assert (s["dropped"], s["dropped_remember"], s["answered_again"]) == (1, 0, 1)
    # scored by the benchmark's facts instead, the same tags mean other facts
    assert conv.score(records)["tags_ok"] == 0


def trial_model(messages: Sequence[dict[str, Any]]) -> str:
    """The trial's failure, scripted from its facts: a right tag for each request, a
    question answered "Noted." with a tag once any tag is in the history, an answer
    when none is; a recall answer only from the context the engine assembled."""
    prompt = str(messages[-1]["content"])
    if "remember or other" in str(messages[0]["content"]):  # the request check
        return "remember" if any(f.request in prompt for f in conv.TRIAL_FACTS) else "other"
    history = [m for m in messages[:-1] if m["role"] in ("user", "assistant")]
    earlier = " ".join(str(m["content"]) for m in messages[:-1]).lower()
    for i, fact in enumerate(conv.TRIAL_FACTS):
        if prompt == fact.request:
            scope = min(fact.scopes)
            return f'Noted. <memory scope="{scope}" key="fact-{i}">{conv.told(fact)}</memory>'
    if any("<memory" in str(m["content"]) for m in history if m["role"] == "assistant"):
        return f'Noted. <memory scope="user" key="q{len(messages)}">{prompt}</memory>'
    for fact in conv.TRIAL_FACTS:
        if prompt == fact.question:
            return f"It is {fact.answer}." if fact.answer in earlier else "I don't know."
    return "An answer."


@pytest.mark.parametrize("history_tags", [True, False])
async def test_the_trial_runs_through_the_chat_engine_and_scores(
    tmp_path: Path, kairox_home: Path, history_tags: bool
) -> None:
    trial = conv.trial()
    config = conv.chat_config(history_tags=history_tags, reserve=64)
    opener = conv.engine_opener(config, tmp_path / "k.db", lambda: ScriptedProvider(trial_model))
    records = await conv.converse(opener, conv=trial)
    assert len(records) == 25 + 8
    s = conv.score(records, trial)
    assert (s["tags_ok"], s["untagged"]) == (8, 0)
    if history_tags:  # every question after the first tag: "Noted." and a false tag
        assert (s["false_tags"], s["recall_ok"], s["resumed_ok"]) == (9 + 8 + 8, 0, 0)
    else:
        assert (s["false_tags"], s["recall_ok"], s["resumed_ok"]) == (0, 8, 8)
    engine = opener(None)
    try:  # the trial's person decided nothing: every card waits
        assert len(engine.kx.approvals.pending()) == 8 + s["false_tags"]
    finally:
        await engine.close()


async def test_the_request_check_keeps_the_trial_from_collapsing(
    tmp_path: Path, kairox_home: Path
) -> None:
    """With history tags on and the request check, each question's false tag is dropped
    and the question answered again from a history without tags: the right tags stay,
    no false tag is raised, and every recall answer is the fact."""
    trial = conv.trial()
    config = conv.chat_config(history_tags=True, reserve=64, request_check=True)
    assert config.memory.request_check is True
    opener = conv.engine_opener(
        config, tmp_path / "k.db", lambda: ScriptedProvider(trial_model), request_check=True
    )
    records = await conv.converse(opener, conv=trial)
    s = conv.score(records, trial)
    assert (s["tags_ok"], s["untagged"], s["false_tags"]) == (8, 0, 0)
    assert (s["recall_ok"], s["resumed_ok"]) == (8, 8)
    assert s["dropped"] == s["answered_again"] == 9 + 8 + 8  # every question came after a tag
    assert s["dropped_remember"] == 0
