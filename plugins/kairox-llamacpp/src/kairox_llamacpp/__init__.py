"""Kairox model provider ``llamacpp``: local GGUF models served by llama.cpp (xllamacpp)."""

from kairox_llamacpp.models import (
    CATALOG,
    DEFAULT_MODEL_NAME,
    LocalModel,
    ModelIntegrityError,
    default_model,
    default_model_path,
)

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL_NAME",
    "LocalModel",
    "ModelIntegrityError",
    "default_model",
    "default_model_path",
]
