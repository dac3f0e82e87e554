"""The built-in extractive compaction strategy and the strategy interface."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.compaction.base import (
    CompactionOutput,
    CompactionRequest,
    CompactionStrategy,
    HistoryItem,
    history_items,
)
from kairox_core.compaction.extractive import ExtractiveStrategy, extract_summary, score_sentence
from kairox_core.events import (
    AssistantMessageCompleted,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.plugins import PluginHost
from kairox_core.testing.compaction_contract import CompactionStrategyContract
from kairox_core.tokens import TokenCounter

COUNTER = TokenCounter()


def events() -> list[object]:
    return [
        UserMessageAdded(
            session_id="s",
            seq=1,
            turn_id="t1",
            text="Hi there. My name is Dana and I work at Acme. How are you?",
        ),
        AssistantMessageCompleted(
            session_id="s", seq=2, turn_id="t1", text="I am well, thanks. Nice to meet you, Dana."
        ),
        UserMessageAdded(
            session_id="s",
            seq=3,
            turn_id="t2",
            text="We decided to launch on March 3rd. Sounds good. "
            "TODO: draft the email. My key is sk-abcdefghijklmnop1234.",
        ),
        ToolInvocationCompleted(
            session_id="s",
            seq=4,
            turn_id="t2",
            tool_call_id="c",
            tool_name="calendar",
            arguments="{}",
            result="Booked room 4 for Friday. ok",
        ),
    ]


async def test_keeps_facts_in_order_labelled_and_redacted() -> None:
    strategy = ExtractiveStrategy()
    assert isinstance(strategy, CompactionStrategy)
    out = await strategy.summarize(CompactionRequest(events=events(), target_tokens=200))
    assert isinstance(out, CompactionOutput) and out.model is None
    assert out.text.split("\n") == [
        "User: My name is Dana and I work at Acme.",
        "Assistant: Nice to meet you, Dana.",
        "User: We decided to launch on March 3rd.",
        "User: TODO: draft the email.",
        "User: My key is [REDACTED:api_key].",
        "Tool (calendar): Booked room 4 for Friday.",
    ]
    assert out.tokens_out == COUNTER.count(out.text)
    assert out.tokens_in == sum(COUNTER.count(i.text) for i in history_items(events()))  # type: ignore[arg-type]
    assert out.strategy == "extractive"


async def test_target_keeps_the_best_sentences() -> None:
    out = await ExtractiveStrategy().compact(CompactionRequest(events=events(), target_tokens=25))
    assert COUNTER.count(out.text) <= 25
    assert "March 3rd" in out.text  # a name, a number, a date and a decision


async def test_memory_keys_and_folded_summaries_count() -> None:
    request = CompactionRequest(
        events=[
            UserMessageAdded(
                session_id="s", seq=9, turn_id="t", text="my editor is helix. the weather is nice"
            )
        ],
        previous_summaries=["User: Dana lives in Lisbon."],
        memory_keys=["user.editor"],
        target_tokens=100,
    )
    assert [i.role for i in request.items] == ["summary", "user"]
    out = await ExtractiveStrategy().summarize(request)
    assert out.text == "User: Dana lives in Lisbon.\nUser: my editor is helix."


def test_nothing_scores_keeps_first_user_sentences() -> None:
    items = [HistoryItem("user", "hello there. how are you"), HistoryItem("assistant", "fine")]
    assert extract_summary(items, 50, COUNTER) == "User: hello there."


def test_scores() -> None:
    assert score_sentence("the weather is nice") == 0
    assert score_sentence("we agreed on it") == 1
    assert score_sentence("Dana pays 5 euros on Monday") == 3


def test_history_items_from_events() -> None:
    items = history_items(events())  # type: ignore[arg-type]
    assert [(i.role, i.seq) for i in items] == [
        ("user", 1),
        ("assistant", 2),
        ("user", 3),
        ("tool", 4),
    ]


def test_registered_as_builtin_plugin() -> None:
    host = PluginHost(load_entry_points=False)
    reg = host.get("compaction_strategies", "extractive")
    assert reg.plugin == "kairox_core.default_plugins.compaction_strategies"
    assert isinstance(reg.factory(config=None, profile=None), ExtractiveStrategy)


sentences = st.lists(
    st.sampled_from(
        [
            "Dana called on Monday.",
            "we will ship 3 boxes.",
            "ok.",
            "nice day.",
            "TODO fix the build.",
            "Acme agreed to pay 40 dollars.",
        ]
    ),
    max_size=30,
).map(" ".join)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(texts=st.lists(sentences, max_size=8), target=st.integers(0, 120))
def test_summary_never_exceeds_target_and_keeps_order(texts: list[str], target: int) -> None:
    items = [HistoryItem("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
    summary = extract_summary(items, target, COUNTER)
    assert COUNTER.count(summary) <= target
    full = "\n".join(f"{'User' if i % 2 == 0 else 'Assistant'}: {t}" for i, t in enumerate(texts))
    pos = 0
    for line in filter(None, summary.split("\n")):
        _, sentence = line.split(": ", 1)
        found = full.find(sentence, pos)
        assert found >= 0
        pos = found


class TestExtractiveStrategyContract(CompactionStrategyContract):
    def make_strategy(self, summary: str) -> ExtractiveStrategy:
        return ExtractiveStrategy()  # no model: picks sentences, ignores ``summary``
