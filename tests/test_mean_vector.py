"""``index_common.mean_vector`` (numpy) gives the floats of the pure-Python loop it replaced."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.retrieval.index_common import mean_vector

pytestmark = pytest.mark.slow


def _reference(vectors: list[list[float]]) -> list[float]:
    total = [0.0] * len(vectors[0])
    for v in vectors:
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        for i, x in enumerate(v):
            total[i] += x / norm
    norm = math.sqrt(sum(x * x for x in total)) or 1.0
    return [x / norm for x in total]


_value = st.one_of(st.just(0.0), st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False))


@given(
    st.integers(1, 48).flatmap(
        lambda d: st.lists(st.lists(_value, min_size=d, max_size=d), min_size=1, max_size=3)
    )
)
def test_same_floats_as_the_python_loop(vectors: list[list[float]]) -> None:
    assert mean_vector(vectors) == _reference(vectors)
