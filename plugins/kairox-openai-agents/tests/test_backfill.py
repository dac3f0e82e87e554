"""backfill.py's choice of older turns: the newest that fit, contiguous, never opening
on a reply whose user message was left out (checked against a brute-force oracle)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.tokens import TokenCounter
from kairox_openai_agents.backfill import Unit, newest_that_fit

COUNTER = TokenCounter("o200k_base")

units = st.lists(
    st.builds(
        lambda user, words: Unit(
            ({"role": "user" if user else "assistant", "content": " ".join(words)},), user
        ),
        st.booleans(),
        st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), max_size=12),
    ),
    max_size=12,
)


def cost(unit: Unit) -> int:
    return sum(COUNTER.message_tokens(m) for m in unit.messages)


def oracle(older: list[Unit], room: int) -> list[Unit]:
    """The longest suffix within ``room``, then its leading replies dropped."""
    best: list[Unit] = []
    for start in range(len(older), -1, -1):
        if sum(cost(u) for u in older[start:]) > room:
            break
        best = older[start:]
    while best and not best[0].user:
        best = best[1:]
    return best


@settings(max_examples=200, deadline=None)
@given(units, st.integers(min_value=0, max_value=200))
def test_the_newest_units_that_fit_never_opening_on_a_reply(older: list[Unit], room: int) -> None:
    taken, used = newest_that_fit(older, room, COUNTER)
    assert taken == oracle(older, room)
    assert used == sum(cost(u) for u in taken) <= room
    assert not taken or taken[0].user
