"""The engine seam: do-nothing defaults, the compaction protocol, registration."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


def _documented_engine() -> str:
    """The worked third-party engine of docs/hooks.md, verbatim."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "hooks.md").read_text()
    section = text.split("## kairox_register_engines", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_an_entry_point_engine_sees_every_turn_end(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "kairox_wordcount").mkdir(parents=True)
    (site / "kairox_wordcount" / "__init__.py").write_text(_documented_engine())
    info = site / "kairox_wordcount-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kairox-wordcount\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kairox]\nwordcount = kairox_wordcount\n")
    script = textwrap.dedent(
        f"""
        from kairox_core import Kairox
        from kairox_core.config import KairoxConfig

        with Kairox.open({str(tmp_path / "kx.db")!r}, KairoxConfig()) as kx:
            s = kx.session()
            s.run_turn_sync("hi", "one two three")
            s.run_turn_sync("again", "four five")
            print(kx.engine("wordcount").words[s.id])
            print(kx.engines[-1].name, [e.name for e in kx.engines[:2]])
            print(s.preview_sync("next").messages[0]["content"])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    for var in ("KAIROX_LOAD_PLUGINS", "KAIROX_DISABLE_PLUGINS", "KAIROX_STRICT_PLUGINS"):
        env.pop(var, None)
    env["KAIROX_STRICT_PLUGINS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    words, order, system = out.stdout.splitlines()[:3]
    assert words == "5"  # both after-turn calls seen
    assert order == "wordcount ['compaction', 'recall']"  # built-ins first
    assert system.endswith("You have said 5 words so far.")  # its contribution, system layer


def test_closing_kairox_closes_its_engines(
    kairox_home: Path, tmp_path: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    from kairox_core import Kairox
    from kairox_core.config import KairoxConfig

    closed: list[str] = []

    class Holder(Engine):
        async def aclose(self) -> None:
            closed.append("closed")

    class Plugin:
        @hookimpl
        def kairox_register_engines(self, register: Callable[..., None]) -> None:
            register("holder", lambda kx: Holder())

    register_plugin(Plugin(), "holder-engine")
    Kairox.open(tmp_path / "kx.db", KairoxConfig()).close()
    assert closed == ["closed"]
