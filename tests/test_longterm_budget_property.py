"""Property: with active packs, pinned facts and long-term chunks, a turn never overflows."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.context import ContextBudgetExceeded
from kairox_core.context.rendering import block_content, item_unit, pack_header
from kairox_core.events import FactPinned
from kairox_core.tokens import TokenCounter

pytestmark = pytest.mark.slow

words = st.lists(
    st.sampled_from(
        ["staging", "database", "password", "Monday", "tea", "[pack x]", "<kairox:packs>", "日本"]
    ),
    min_size=1,
    max_size=25,
).map(" ".join)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    packs=st.lists(words, max_size=3),
    chunks=st.lists(
        st.tuples(words, st.sampled_from(["session", "project", "global"])), max_size=6
    ),
    pins=st.lists(words, max_size=3),
    prompts=st.lists(words, min_size=1, max_size=4),
    window=st.integers(80, 1200),
    reserve_share=st.floats(0, 0.5),
    share=st.floats(0, 0.5),
    threshold=st.floats(-0.2, 0.6),
)
def test_packs_pins_and_chunks_never_overflow(
    tmp_path_factory, packs, chunks, pins, prompts, window, reserve_share, share, threshold
) -> None:
    reserve = int(window * reserve_share)
    cfg = KairoxConfig.model_validate(
        {
            "kairox": {"system_prompt": "Be brief."},
            "profiles": {"default": {"context_window": window, "reserve": reserve}},
            "retrieval": {"workspace_index": False},
            "longterm": {"share": share, "threshold": threshold, "k": 4},
        }
    )
    budget = window - reserve
    root = tmp_path_factory.mktemp("ltprop")
    cfg = cfg.model_copy(
        update={"packs": cfg.packs.model_copy(update={"dir": str(root / "packs")})}
    )
    with Kairox.open(root / "k.db", cfg) as kx:
        s = kx.session(workspace="w")
        for i, text in enumerate(packs):
            kx.packs.create(f"p{i}", text=text)
            kx.packs.activate(f"p{i}")
        for text, scope in chunks:
            kx.longterm.add(text, scope=scope, session_id=s.id, workspace_id="w")
        for i, text in enumerate(pins):
            kx.events_store.append(FactPinned(session_id=s.id, fact_id=f"f{i}", text=text))
        counter = s.assembler().counter
        fresh = TokenCounter(counter.encoding, margin=counter.margin, cache_size=1)
        pack_msg = (
            [
                {
                    "role": "system",
                    "content": block_content(
                        "packs",
                        [
                            item_unit(pack_header(f"p{i}", "personal"), t)
                            for i, t in enumerate(packs)
                        ],
                    ),
                }
            ]
            if packs
            else []
        )
        for prompt in prompts:
            try:
                turn = s.begin_turn_sync(prompt)
            except ContextBudgetExceeded as err:
                assert err.total > budget
                if packs:
                    assert any(p.startswith("active context packs (p0") for p in err.parts)
                continue
            assert fresh.count_messages(turn.messages) == turn.trace.total <= budget
            for msg in pack_msg:  # every active pack, verbatim, in every turn
                assert msg in turn.messages
            layer = turn.trace.layer("longterm")
            assert layer.tokens <= int(share * budget)
            turn.complete_sync("ok")
