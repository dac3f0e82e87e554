"""Kairox model provider ``llamacpp``: local GGUF models through llama-cpp-python."""

from kairox_llamacpp.models import DEFAULT_MODEL_NAME, default_model_path

__all__ = ["DEFAULT_MODEL_NAME", "default_model_path"]
