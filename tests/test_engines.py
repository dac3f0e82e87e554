"""The engine seam: do-nothing defaults, the compaction protocol, registration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kairox_core import hookimpl
from kairox_core.engines import (
    AssemblyRequest,
    CompactionEngine,
    CompactionResult,
    Engine,
)
from kairox_core.plugins import PluginHost


async def test_engine_defaults_do_nothing() -> None:
    engine = Engine()
    request = AssemblyRequest("hi", "default")
    assert await engine.before_assembly(None, request) == ()  # type: ignore[arg-type]
    assert await engine.after_turn(None, None) is None  # type: ignore[arg-type]
    assert not isinstance(engine, CompactionEngine)


def test_compaction_engine_is_found_by_protocol() -> None:
    class Compacts(Engine):
        async def compact(
            self, session: Any, *, first_seq: Any = None, last_seq: Any = None, trigger: str = ""
        ) -> CompactionResult:
            return CompactionResult("skipped")

    assert isinstance(Compacts(), CompactionEngine)


def test_compaction_result_as_dict_leaves_events_out() -> None:
    result = CompactionResult("completed", first_seq=1, last_seq=4, folded=(3,))
    d = result.as_dict()
    assert d["folded"] == [3] and "summary" not in d and "originals" not in d
    assert str(result).startswith("seqs 1-4")


def test_engines_register_like_any_plugin(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    class Plugin:
        @hookimpl
        def kairox_register_engines(self, register: Callable[..., None]) -> None:
            register("noop", lambda kx: Engine())

    host = register_plugin(Plugin(), "noop-engine")
    assert host.get("engines", "noop").plugin == "noop-engine"
