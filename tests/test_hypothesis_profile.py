"""The ``ci`` hypothesis profile: chosen under CI, derandomized, loaded for this run."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.testing.profiles import hypothesis_profile


def test_ci_selects_the_derandomized_profile() -> None:
    assert hypothesis_profile({"CI": "true"}) == "ci"
    assert hypothesis_profile({"CI": "1", "HYPOTHESIS_PROFILE": "dev"}) == "dev"
    assert hypothesis_profile({}) == "dev" and hypothesis_profile({"CI": "0"}) == "dev"
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert settings.get_profile("dev").deadline is None  # no wall-clock bound either way


def test_the_profile_for_this_environment_is_loaded() -> None:
    assert settings.default.derandomize is (hypothesis_profile(os.environ) == "ci")


def _run_once() -> list[int]:
    drawn: list[int] = []

    @settings(settings.get_profile("ci"), max_examples=20)
    @given(st.lists(st.integers()))
    def draw(xs: list[int]) -> None:
        drawn.append(sum(xs) + len(xs))

    draw()
    return drawn


@pytest.mark.slow
def test_derandomized_runs_draw_the_same_examples() -> None:
    first, second = _run_once(), _run_once()
    assert first == second and len(set(first)) > 1
