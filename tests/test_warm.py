"""Models load once per process: every session, profile and recall share one backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from kairox_core import hookimpl
from kairox_core.config import KairoxConfig, ProfileConfig, RetrievalSection
from kairox_core.facade import Kairox
from kairox_core.plugins import PluginHost
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.warm import clear_warm


class CountingPlugin:
    """An embedding backend whose factory counts how often it is built (a model load)."""

    def __init__(self) -> None:
        self.loads = 0

    @hookimpl
    def kairox_register_embedding_backends(self, register: Callable[..., None]) -> None:
        def make(dimension: int = 64) -> HashingEmbedding:
            self.loads += 1
            return HashingEmbedding(dimension)

        register("counting", make)


def test_sessions_profiles_and_recall_share_one_backend(
    tmp_path: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    clear_warm()
    plugin = CountingPlugin()
    register_plugin(plugin, "counting-test")
    config = KairoxConfig(
        profiles={"default": ProfileConfig(), "other": ProfileConfig(context_window=4096)},
        retrieval=RetrievalSection(backend="counting", backend_options={"dimension": 32}),
    )
    with Kairox.open(tmp_path / "kx.db", config) as kx:
        first = kx.session(workspace="w", profile="default")
        first.run_turn_sync("the volcano erupted", "noted")
        second = kx.session(workspace="w", profile="other")
        second.run_turn_sync("what about the volcano?", "it erupted")
        second.switch_profile_sync("default")
        second.run_turn_sync("and the lava?", "it flowed")
        asyncio.run(kx.retriever_for("other", "w").search("volcano", 3))
    with Kairox.open(tmp_path / "kx.db", config) as kx:  # a second Kairox in the process too
        kx.session(workspace="w", profile="default").run_turn_sync("volcano again", "yes")
    assert plugin.loads == 1
    clear_warm()
