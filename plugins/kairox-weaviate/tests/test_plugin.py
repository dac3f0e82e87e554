"""The installed distribution: entry point, lazy imports, and the ``kairox`` CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import API_KEY, KEY_ENV, WordHashEmbedder
from fake_weaviate import FakeObject, FakeWeaviate

from kairox_core.plugins import PluginHost

KAIROX = str(Path(sys.executable).with_name("kairox"))


def test_entry_point_registers_the_weaviate_kind(kairox_plugins: PluginHost) -> None:
    reg = kairox_plugins.get("retrievers", "weaviate")
    assert (reg.plugin, reg.distribution) == ("weaviate", "kairox-weaviate")
    info = next(i for i in kairox_plugins.plugin_infos() if i.name == "weaviate")
    assert info.error is None and info.registers == {"retrievers": ["weaviate"]}


def test_plugin_module_imports_no_heavy_library() -> None:
    code = ("import sys, kairox_weaviate.plugin; "
            "print(sorted(m for m in ('weaviate', 'grpc', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _run(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **env_extra, "KAIROX_DB": str(cwd / "kx.db")}
    env.pop("KAIROX_CONFIG", None)
    return subprocess.run([KAIROX, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=60)


def test_kairox_plugins_json_lists_it(tmp_path: Path) -> None:
    result = _run(["plugins", "--json"], tmp_path, {})
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["weaviate"]["distribution"] == "kairox-weaviate"
    assert rows["weaviate"]["registers"] == {"retrievers": ["weaviate"]}
    assert rows["weaviate"]["error"] is None


@pytest.fixture
def toml_dir(tmp_path: Path, fake_weaviate: FakeWeaviate) -> Path:
    embedder = WordHashEmbedder()
    name = f"Kx{uuid.uuid4().hex[:12]}"
    texts = {"tides": "The moon's gravity pulls the oceans and makes the tides rise and fall.",
             "lava": "Magma rises through the crust and erupts from a volcano as lava."}
    fake_weaviate.add_collection(name, [
        FakeObject({"slug": key, "text": text}, {"default": embedder.embed_query(text)})
        for key, text in texts.items()], vectorizer=embedder.embed_query)
    (tmp_path / "kairox.toml").write_text(f"""
[profiles.default]
[profiles.research]

[retrieval]
workspace_index = false

[knowledge_bases.science]
kind = "weaviate"
profiles = ["research"]
url = "{fake_weaviate.url}"
grpc_port = {fake_weaviate.grpc_port}
collection = "{name}"
api_key = "$env:{KEY_ENV}"
id_property = "slug"
alpha = 0.5
""")
    return tmp_path


def test_kb_search_from_kairox_toml(toml_dir: Path) -> None:
    result = _run(["kb", "search", "science", "moon tides", "--json"], toml_dir,
                  {KEY_ENV: API_KEY})
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["doc_id"] == "tides" and hits[0]["source"] == "science"
    assert hits[0]["metadata"] == {"slug": "tides"}


def test_kairox_search_uses_it_only_for_its_profiles(toml_dir: Path) -> None:
    research = _run(["search", "volcano lava", "--profile", "research", "--json"], toml_dir,
                    {KEY_ENV: API_KEY})
    assert research.returncode == 0, research.stderr
    assert json.loads(research.stdout)["hits"][0]["doc_id"] == "lava"
    default = _run(["search", "volcano lava", "--json"], toml_dir, {KEY_ENV: API_KEY})
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)["hits"] == []


def test_cli_error_names_the_knowledge_base_without_traceback(toml_dir: Path) -> None:
    result = _run(["kb", "search", "science", "moon"], toml_dir, {KEY_ENV: "wrong-key"})
    assert result.returncode != 0
    assert "knowledge base 'science'" in result.stderr and "HTTP 401" in result.stderr
    assert "Traceback" not in result.stderr
