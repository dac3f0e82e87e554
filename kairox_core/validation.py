"""pydantic errors as Kairox reports them: the file, the key path from the top of the
file, and a fix (the closest known key for a typo). Shared by config.py and plugins'
options models (plugin_options.py), so both read the same."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from kairox_core.errors import ConfigError

SECRET_WORDS = ("key", "secret", "token", "password", "credential")


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def _key_path(loc: Iterable[Any]) -> str:
    return ".".join(str(p) for p in loc if not str(p).startswith("function-"))


def format_validation_error(
    exc: ValidationError,
    source: str | None,
    *,
    prefix: str = "",
    model: type[BaseModel] | None = None,
) -> ConfigError:
    """One ``ConfigError`` for every problem pydantic found: file, key, fix.

    ``prefix`` and ``model`` serve a plugin's options model, validated for one section
    (``knowledge_bases.notes``): keys are reported from the top of the file, and unknown
    keys are matched against ``model``'s fields.
    """
    lines = []
    first_key = None
    for err in exc.errors():
        loc = err["loc"]
        key = ".".join(p for p in (prefix, _key_path(loc)) if p)
        etype = err["type"]
        if etype == "kairox_key":  # raised for a key inside the value at loc
            ctx = err.get("ctx") or {}
            key = ".".join(p for p in (key, str(ctx["sub"])) if p)
            first_key = first_key or key
            lines.append(f"key '{key}': {ctx['message']}")
            continue
        first_key = first_key or key
        if etype == "extra_forbidden":
            msg = f"unknown key '{key}'"
            fix = _suggest(loc, model) if model is not None else None
        elif etype == "missing":
            msg = f"missing required key '{key}'"
            fix = "add it"
        else:
            text = err["msg"].removeprefix("Value error, ")
            msg = f"key '{key}': {text}" if key else text
            fix = None
            if not is_secret_key(key) and "input" in err and etype not in ("value_error",):
                msg += f" (got {_short_repr(err['input'])})"
        lines.append(msg + (f"  (fix: {fix})" if fix else ""))
    error = ConfigError("\n  ".join(lines), file=source)
    error.key = first_key
    return error


def _short_repr(value: Any, limit: int = 80) -> str:
    """A wrong value as echoed in an error: enough to recognise it, never a screenful."""
    import reprlib

    shortener = reprlib.Repr()  # keyword arguments only from Python 3.12
    shortener.maxlevel, shortener.maxstring, shortener.maxother = 3, limit, limit
    short = shortener.repr(value)
    return short if len(short) <= limit else short[: limit - 3] + "..."


def _suggest(loc: tuple[Any, ...] | Any, root: type[BaseModel]) -> str:
    import difflib

    parts = [str(p) for p in loc]
    model: Any = root
    for part in parts[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            continue
        ann = field.annotation
        model = getattr(ann, "__args__", (None, ann))[-1] if hasattr(ann, "__args__") else ann
    known = list(getattr(model, "model_fields", {}) or [])
    close = difflib.get_close_matches(parts[-1], known, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return f"remove it; known keys: {', '.join(k for k in known if k != 'source')}"
