"""``[retrieval]``: the workspace index, its search and its share of the budget."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from kairox_core.config.base import Strict, key_error

#: far above any real embedding model (3072 for the largest OpenAI one); a typo such as
#: 10**11 would otherwise allocate vectors until MemoryError
MAX_EMBEDDING_DIMENSION = 65_536
HASHING_BACKEND = "hashing"  # the built-in embedding backend: no model, no meaning


class RetrievalSection(Strict):
    """``[retrieval]``: the workspace index and the share of the budget hits may use."""

    workspace_index: bool = True
    backend: str = HASHING_BACKEND
    backend_options: dict[str, Any] = Field(default_factory=dict)
    # 0.5 (was 0.25) and recall_k 64: with the default hashing backend, recall then
    # finds more of the evidence than plain BM25 turn ranking (docs/recall.md, LoCoMo)
    share: float = Field(0.5, ge=0, le=1)
    k: int = Field(8, gt=0)
    timeout: float = Field(10.0, gt=0)
    workspace_weight: float = Field(1.0, gt=0)
    # auto: keyword alone when the backend is "hashing" (its vectors carry no meaning and
    # only add noise to the fusion), hybrid otherwise (see ``search_mode``)
    mode: str = Field("auto", pattern="^(auto|hybrid|vector|keyword)$")
    chunk_tokens: int = Field(512, ge=32)
    chunk_overlap: int = Field(64, ge=0)
    # hybrid search: weighted reciprocal rank fusion of the keyword and vector rankings
    rrf_k: int = Field(60, gt=0)
    keyword_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    hybrid_candidates: int = Field(100, gt=0)
    max_file_bytes: int = Field(2_000_000, gt=0)  # `kairox index` skips larger files

    @property
    def search_mode(self) -> str:
        """The mode searches use: ``mode``, with ``auto`` resolved for the backend."""
        if self.mode != "auto":
            return self.mode
        return "keyword" if self.backend == HASHING_BACKEND else "hybrid"

    @model_validator(mode="before")
    @classmethod
    def _overlap_follows_chunk_tokens(cls, data: Any) -> Any:
        """An unset overlap shrinks with a small ``chunk_tokens`` instead of failing."""
        if isinstance(data, dict) and "chunk_overlap" not in data:
            tokens = data.get("chunk_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 32:
                return {**data, "chunk_overlap": min(64, tokens // 2 - 1)}
        return data

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_half(cls, overlap: int, info: ValidationInfo) -> int:
        tokens = info.data.get("chunk_tokens")
        if tokens is not None and overlap >= tokens // 2:
            raise ValueError(
                f"chunk_overlap ({overlap}) must be below half of chunk_tokens ({tokens}), "
                f"so at most {tokens // 2 - 1}; lower chunk_overlap or raise chunk_tokens"
            )
        return overlap

    @field_validator("backend_options")
    @classmethod
    def _sane_dimension(cls, options: dict[str, Any]) -> dict[str, Any]:
        if "dimension" not in options:
            return options
        dim = options["dimension"]
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise key_error("dimension", f"must be a whole number (got {dim!r})")
        if not 1 <= dim <= MAX_EMBEDDING_DIMENSION:
            raise key_error(
                "dimension",
                f"must be between 1 and at most {MAX_EMBEDDING_DIMENSION} (got {dim}); "
                f"embedding models use a few hundred to a few thousand",
            )
        return options
