"""The installed distribution is found through the ``kairox`` entry-point group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import kb_config

from kairox_core.plugins import PluginHost
from kairox_core.retrieval.selection import build_knowledge_base
from kairox_tantivy.options import TantivyOptions
from kairox_tantivy.retriever import TantivyRetriever


def test_kind_is_registered_through_the_entry_point(
    kairox_plugins: PluginHost, tmp_path: Path
) -> None:
    reg = kairox_plugins.get("retrievers", "tantivy")
    assert reg.distribution == "kairox-tantivy" and reg.options is TantivyOptions
    retriever = build_knowledge_base(kb_config("notes", path=str(tmp_path), title_boost=0.5))
    assert isinstance(retriever, TantivyRetriever) and retriever.name == "notes"
    assert retriever.options.title_boost == 0.5


def test_kairox_plugins_lists_it_and_plugin_import_stays_light() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kairox_tantivy.plugin; print('tantivy' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"  # tantivy itself loads only when a kb is used
    kairox = Path(sys.executable).with_name("kairox")
    listed = subprocess.run(
        [str(kairox), "plugins", "--json"], capture_output=True, text=True, check=True
    )
    infos = {info["distribution"]: info for info in json.loads(listed.stdout)}
    assert infos["kairox-tantivy"]["registers"] == {"retrievers": ["tantivy"]}
    assert infos["kairox-tantivy"]["error"] is None
