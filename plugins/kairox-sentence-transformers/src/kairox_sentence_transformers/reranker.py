"""``CrossEncoderReranker``: a Kairox ``Reranker`` over ``sentence_transformers.CrossEncoder``.

A cross-encoder reads the query and a passage together and outputs one relevance
score: far better at ordering a short list than comparing two independent vectors, and
far slower, so Kairox gives it only the fused top-N. Any cross-encoder directory or
hub id works (e.g. ``cross-encoder/ms-marco-MiniLM-L6-v2``, ``BAAI/bge-reranker-base``);
as for embeddings, downloads are off unless ``HF_HUB_OFFLINE=0`` is set.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kairox_sentence_transformers.backend import (
    DEVICES,
    EmbeddingConfigError,
    _looks_like_path,
    _offline,
    _pick_device,
    prepare_runtime,
)

WHERE = "profiles.<name>.reranker_options"


def _resolve(model: str) -> str:
    if _looks_like_path(model):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise EmbeddingConfigError(
                f"{WHERE}.model: no model directory at {path}; fix: point model at a "
                f"cross-encoder folder (config.json and tokenizer files) or a hub id"
            )
        return str(path.resolve())
    return model


class CrossEncoderReranker:
    """Scores (query, passage) pairs with one cross-encoder forward pass per batch."""

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 16,
        device: str = "cpu",
        max_length: int | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        if not model or not isinstance(model, str):
            raise EmbeddingConfigError(
                f"{WHERE}.model is required: a cross-encoder directory or hub id, e.g. "
                f'model = "cross-encoder/ms-marco-MiniLM-L6-v2" (already in the Hugging Face '
                f"cache) or a local folder"
            )
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
        self.model_name = model
        self.name = f"cross-encoder:{model}"
        self.batch_size = batch_size
        self.device = _pick_device(device.split(":", 1)[0])
        if ":" in device:
            self.device = device
        self._lock = threading.Lock()  # torch modules are not reentrant
        self._model = self._load(_resolve(model), max_length, trust_remote_code)

    def _load(self, target: str, max_length: int | None, trust_remote_code: bool) -> Any:
        from sentence_transformers import CrossEncoder

        try:
            model = CrossEncoder(
                target,
                device=self.device,
                max_length=max_length,
                local_files_only=_offline(),
                trust_remote_code=trust_remote_code,
            )
        except Exception as exc:  # OSError, ValueError, HF errors...
            hint = (
                "downloads are off (HF_HUB_OFFLINE=1): use a local model directory or a "
                "model already in the Hugging Face cache"
                if _offline()
                else "check the model name or directory"
            )
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise EmbeddingConfigError(
                f"{WHERE}.model: cannot load cross-encoder '{self.model_name}': "
                f"{type(exc).__name__}: {first}; fix: {hint}"
            ) from None
        labels = getattr(model, "num_labels", 1)
        if labels != 1:
            raise EmbeddingConfigError(
                f"{WHERE}.model: '{self.model_name}' outputs {labels} labels per pair; a "
                f"reranker needs a model with one relevance score (num_labels = 1)"
            )
        return model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per passage (the model's raw logit: only order matters)."""
        if not texts:
            return []
        with self._lock:
            scores = self._model.predict(
                [(query, text) for text in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [float(s) for s in scores.reshape(-1).tolist()]

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(model={self.model_name!r}, device={self.device!r})"
