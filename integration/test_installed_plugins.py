"""The four retrieval plugins installed side by side: `kairox plugins --json` lists each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

KAIROX = str(Path(sys.executable).with_name("kairox"))
EXPECTED = {
    "kairox-tantivy": "tantivy",
    "kairox-bedrock": "bedrock",
    "kairox-pinecone": "pinecone",
    "kairox-weaviate": "weaviate",
}


def test_kairox_plugins_json_lists_every_installed_plugin(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROX_")}
    done = subprocess.run(
        [KAIROX, "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no plugin failed to load, none warned
    listed = json.loads(done.stdout)
    infos = {info["distribution"]: info for info in listed if not info["builtin"]}
    for dist, kind in EXPECTED.items():
        info = infos[dist]
        assert info["registers"] == {"retrievers": [kind]}, info
        assert info["error"] is None and info["builtin"] is False
        assert info["version"]
    # the core's own kind comes from a built-in plugin of kairox-core
    core = [i for i in listed if "sqlite_fts" in i["registers"].get("retrievers", [])]
    assert [(i["distribution"], i["builtin"]) for i in core] == [("kairox-core", True)]


def test_no_retrieval_kind_is_registered_twice() -> None:
    from kairox_core.plugins import get_plugins, reset_plugins

    reset_plugins()
    try:
        registry = get_plugins().registry("retrievers")
        assert {"sqlite_fts", *EXPECTED.values()} <= set(registry)
        for dist, kind in EXPECTED.items():
            assert registry[kind].distribution == dist
    finally:
        reset_plugins()
