"""Hypothesis profiles shared by kairox-core's and every plugin's test suite.

``ci`` is derandomized (examples derived from each test's own source, no example
database): a CI run is the same run every time. It is loaded whenever ``CI`` is set
(nox passes the environment through to its sessions; ``.ci/run`` sets it). Neither
profile has a deadline: Hypothesis' default (200 ms an example) is a wall-clock bound,
and a loaded machine turned a slow first example into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)


def hypothesis_profile(environ: Mapping[str, str] = os.environ) -> str:
    """The profile for this environment: ``HYPOTHESIS_PROFILE``, else ``ci`` under CI."""
    chosen = environ.get("HYPOTHESIS_PROFILE")
    if chosen:
        return chosen
    return "ci" if environ.get("CI", "").strip() not in ("", "0", "false") else "dev"


def load_hypothesis_profile(environ: Mapping[str, str] = os.environ) -> str:
    name = hypothesis_profile(environ)
    settings.load_profile(name)
    return name
