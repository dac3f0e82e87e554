"""The installed distribution: entry point, lazy imports, and the ``kairox`` CLI end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import KEY_ENV, WordHashEmbedder

from kairox_core.plugins import PluginHost
from kairox_weaviate.testing import FakeObject, FakeWeaviate

KAIROX = str(Path(sys.executable).with_name("kairox"))


def test_entry_point_registers_the_weaviate_kind(kairox_plugins: PluginHost) -> None:
    reg = kairox_plugins.get("retrievers", "weaviate")
    assert (reg.plugin, reg.distribution) == ("weaviate", "kairox-weaviate")
    info = next(i for i in kairox_plugins.plugin_infos() if i.name == "weaviate")
    assert info.error is None and info.registers == {"retrievers": ["weaviate"]}


def test_plugin_module_imports_no_heavy_library() -> None:
    code = (
        "import sys, kairox_weaviate.plugin; "
        "print(sorted(m for m in ('weaviate', 'grpc', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _run(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **env_extra, "KAIROX_DB": str(cwd / "kx.db")}
    env.pop("KAIROX_CONFIG", None)
    return subprocess.run(
        [KAIROX, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60
    )


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
    texts = {
        "tides": "The moon's gravity pulls the oceans and makes the tides rise and fall.",
        "lava": "Magma rises through the crust and erupts from a volcano as lava.",
    }
    fake_weaviate.add_collection(
        name,
        [
            FakeObject({"slug": key, "text": text}, {"default": embedder.embed_query(text)})
            for key, text in texts.items()
        ],
        vectorizer=embedder.embed_query,
    )
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


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``kairox`` in-process (imports already warm) and return (exit code, out, err)."""
    from kairox_core.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cli_env(toml_dir: Path, kairox_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(toml_dir)
    monkeypatch.setenv("KAIROX_DB", str(toml_dir / "kx.db"))
    return toml_dir


def test_kb_search_from_kairox_toml(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(["kb", "search", "science", "moon tides", "--json"], capsys)
    assert code == 0, err
    hits = json.loads(out)
    assert hits[0]["doc_id"] == "tides" and hits[0]["source"] == "science"
    assert hits[0]["metadata"] == {"slug": "tides"}


def test_kairox_search_uses_it_only_for_its_profiles(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(["search", "volcano lava", "--profile", "research", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["hits"][0]["doc_id"] == "lava"
    code, out, err = _cli(["search", "volcano lava", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["hits"] == []  # the default profile does not see 'science'


def test_cli_error_names_the_knowledge_base(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "wrong-key")
    code, _, err = _cli(["kb", "search", "science", "moon"], capsys)
    assert code == 1
    assert err.startswith("kairox: error: knowledge base 'science':") and "HTTP 401" in err
