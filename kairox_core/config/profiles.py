"""``[profiles.<name>]``: one model, its window and its reranker."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool, ValidationInfo, field_validator

from kairox_core.config.base import Strict


class ProfileConfig(Strict):
    """``[profiles.<name>]``: one model and its window."""

    # None: the provider's own model (with no provider configured, kairox-llamacpp's
    # default local model); it was "smollm2-135m-instruct" before that stopped being
    # the default, and `kairox config show` and /v1/models then named a model not in use
    model: str | None = None
    provider: str | None = None  # a [providers.<name>] id; None = the default provider
    context_window: int = Field(8192, gt=0)
    reserve: int = Field(1024, ge=0)  # tokens kept free for the response
    encoding: str | None = None  # None: from the model name, else o200k_base
    token_margin: float = Field(0.10, ge=0, le=1)  # for models whose tokenizer is not OpenAI's
    compaction_trigger: float = Field(0.7, gt=0, le=1)
    instructions: str = ""
    aliases: tuple[str, ...] = ()
    # a reranker registered through kairox_register_rerankers reorders the fused top-N
    # of workspace search and of recall of past turns; None: fused order as it is
    reranker: str | None = None
    reranker_options: dict[str, Any] = Field(default_factory=dict)
    rerank_top_n: int = Field(20, gt=0)
    # the model takes images: the new prompt's images travel as OpenAI image_url parts
    vision: StrictBool = False

    @field_validator("reserve")
    @classmethod
    def _reserve_below_window(cls, reserve: int, info: ValidationInfo) -> int:
        window = info.data.get("context_window")
        if window is not None and reserve >= window:
            raise ValueError(
                f"reserve ({reserve}) must be smaller than context_window ({window}); "
                f"lower reserve or raise context_window"
            )
        return reserve

    @property
    def budget(self) -> int:
        return self.context_window - self.reserve
