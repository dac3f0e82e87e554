"""``kairox serve``: the HTTP API, an OpenAI-compatible endpoint and the web app.

The web stack (FastAPI, uvicorn) is the optional extra ``kairox-core[web]``, so the
core installs without it; ``require_web()`` turns its absence into a clear user error.
"""

from __future__ import annotations

import importlib.util

from kairox_core.errors import KairoxUserError


def require_web() -> None:
    """Raise a user error (exit 2) naming the extra when FastAPI or uvicorn is missing."""
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise KairoxUserError(
            f"`kairox serve` needs {' and '.join(missing)}, which are not installed\n"
            f"  fix: pip install 'kairox-core[web]'"
        )
