"""End to end: generated sessions driven through the facade never overflow the budget."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.context import ContextBudgetExceeded
from kairox_core.context.rendering import block_content, item_unit, pinned_header
from kairox_core.events import CompactionSummary, FactPinned
from kairox_core.tokens import TokenCounter

pytestmark = pytest.mark.slow

words = st.lists(
    st.sampled_from(
        ["tea", "plan", "Friday", "42", "ok.", "<b>", "[x]", "\n", "日本", "deadline", "```", "é"]
    ),
    max_size=30,
).map(" ".join)
marker = st.sampled_from(
    [
        "",
        ' <memory scope="session">noted {}</memory>',
        ' <memory scope="user" key="k">{}</memory>',
        ' <memory scope="workspace" key="w">{}</memory>',
    ]
)
turns = st.lists(
    st.tuples(
        words, st.lists(words, max_size=2), words, marker, st.sampled_from(["", "pin", "compact"])
    ),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=turns,
    window=st.integers(60, 900),
    reserve_share=st.floats(0, 0.5),
    model=st.sampled_from(["gpt-4o", "smollm2-135m-instruct"]),
)
def test_generated_sessions_never_overflow(
    tmp_path_factory, turns, window, reserve_share, model
) -> None:
    reserve = int(window * reserve_share)
    cfg = KairoxConfig.model_validate(
        {
            "kairox": {"system_prompt": "Be brief."},
            "profiles": {
                "default": {
                    "model": model,
                    "context_window": window,
                    "reserve": reserve,
                    "token_margin": 0.1,
                }
            },
            "retrieval": {"workspace_index": False},
        }
    )
    budget = window - reserve
    db = tmp_path_factory.mktemp("prop") / "k.db"
    with Kairox.open(db, cfg) as kx:
        s = kx.session(workspace="w")
        counter = s.assembler().counter
        pinned = False  # a refused turn records nothing: its "pin" never happens
        fresh = TokenCounter(counter.encoding, margin=counter.margin, cache_size=1)
        for i, (prompt, tools, reply, mark, extra) in enumerate(turns):
            pins = (
                [
                    {
                        "role": "system",
                        "content": block_content(
                            "pinned",
                            [
                                item_unit(pinned_header(f.fact_id), f.text)
                                for f in s.refresh_compaction().pinned
                            ],
                        ),
                    }
                ]
                if pinned
                else []
            )
            try:
                turn = s.begin_turn_sync(prompt)
            except ContextBudgetExceeded as err:
                mandatory = fresh.count_messages(
                    [
                        {"role": "system", "content": "Be brief."},
                        *pins,
                        {"role": "user", "content": prompt},
                    ]
                )
                assert mandatory > budget and err.total == mandatory
                continue
            assert fresh.count_messages(turn.messages) == turn.trace.total <= budget
            assert turn.messages[-1] == {"role": "user", "content": prompt}
            for pin in pins:  # every pinned fact, verbatim, in every later turn
                assert pin in turn.messages
            for j, result in enumerate(tools):
                turn.add_tool_result(f"c{i}.{j}", "tool", "{}", result)
            turn.complete_sync(reply + mark.format(f"item {i}"))
            for p in kx.approvals.pending():
                kx.approvals.accept(p.id)
            if extra == "pin":
                pinned = True
                kx.events_store.append(
                    FactPinned(session_id=s.id, fact_id=f"f{i}", text=f"fact {i}: {prompt}")
                )
            elif extra == "compact":
                last = kx.events_store.last_seq(s.id)
                kx.events_store.append(
                    CompactionSummary(
                        session_id=s.id,
                        compaction_id=f"c{i}",
                        summary=f"summary {i}",
                        first_seq=1,
                        last_seq=max(1, last - 2),
                        strategy="test",
                    )
                )
        try:
            preview = s.preview_sync("")
        except ContextBudgetExceeded as err:  # pins are mandatory: refused, not dropped
            assert "pinned facts" in err.parts and err.total > budget
            return
        assert fresh.count_messages(preview.messages) == preview.trace.total <= budget
