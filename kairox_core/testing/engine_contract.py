"""Contract tests for engines: subclass ``EngineContract``.

A subclass names the engine (``engine_name``, as registered through
``kairox_register_engines``) and may supply the configuration it needs
(``make_config``: by default a small window, so compaction and recall run within a few
turns). Every engine then is built once per ``Kairox`` under its name, contributes
only labelled ``Contribution`` objects to a layer the assembler knows, keeps every
turn within the budget, lets the session go on after a compaction, and closes cleanly.
"""

from __future__ import annotations

import typing
from pathlib import Path

from kairox_core.config import KairoxConfig
from kairox_core.engines import AssemblyRequest, Contribution, ContributionLayer, Engine
from kairox_core.facade import Kairox
from kairox_core.sync import run_sync
from kairox_core.testing.multiprocess import FILLER, config

LAYERS = set(typing.get_args(ContributionLayer))


class EngineContract:
    """Subclass and set ``engine_name``; override ``make_config`` when needed."""

    engine_name: str = ""
    turns: int = 8

    def make_config(self) -> KairoxConfig:
        return config()

    def _open(self, tmp_path: Path) -> Kairox:
        return Kairox.open(tmp_path / "kx.db", self.make_config())

    def _talk(self, kx: Kairox, n: int) -> str:
        session = kx.session(workspace="w")
        for i in range(n):
            session.run_turn_sync(f"question {i}: {FILLER}", f"answer {i}: noted, item {i}.")
        return session.id

    def test_built_once_under_its_name(self, tmp_path: Path) -> None:
        kx = self._open(tmp_path)
        try:
            engine = kx.engine(self.engine_name)
            assert isinstance(engine, Engine)
            assert engine.name == self.engine_name
            assert [e for e in kx.engines if e.name == self.engine_name] == [engine]
        finally:
            kx.close()

    def test_contributions_are_labelled_and_placed(self, tmp_path: Path) -> None:
        kx = self._open(tmp_path)
        try:
            sid = self._talk(kx, self.turns)
            session = kx.session(session_id=sid)
            engine = kx.engine(self.engine_name)
            request = AssemblyRequest(prompt="what was item 1?", profile=session.profile)
            contributions = run_sync(engine.before_assembly(session, request))
            for c in contributions:
                assert isinstance(c, Contribution)
                assert c.engine == engine.name and c.layer in LAYERS, c
        finally:
            kx.close()

    def test_every_turn_stays_within_the_budget(self, tmp_path: Path) -> None:
        kx = self._open(tmp_path)
        try:
            session = kx.session(workspace="w")
            for i in range(self.turns):
                turn = session.begin_turn_sync(f"question {i}: {FILLER}")
                assert turn.trace.total <= turn.trace.budget, (i, turn.trace.total)
                turn.complete_sync(f"answer {i}: noted.")
        finally:
            kx.close()

    def test_the_session_goes_on_after_a_compaction(self, tmp_path: Path) -> None:
        kx = self._open(tmp_path)
        try:
            sid = self._talk(kx, self.turns)
            outcome = kx.compact(sid)
            assert outcome.status in ("completed", "skipped"), outcome
            session = kx.session(session_id=sid)
            assert session.run_turn_sync("and now?", "still here.").text == "still here."
        finally:
            kx.close()

    def test_close_twice_is_harmless(self, tmp_path: Path) -> None:
        kx = self._open(tmp_path)
        self._talk(kx, 2)
        kx.close()
        kx.close()
