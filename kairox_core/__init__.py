"""Kairox: durable memory, retrieval and a context window that never overflows.

The names in ``__all__`` are the package's public surface for applications and
integrations (the framework adapters import from here and nowhere else in the core but
the modules marked public in docs/python-api.md): import them from ``kairox_core``, not
from the module that defines them today, which may move.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from kairox_core.hookspecs import hookimpl

__version__ = "0.1.0"

# Public name -> the module defining it, imported only when the name is first asked for
# (the facade pulls in the stores and the assembler).
_LAZY = {
    "Kairox": "kairox_core.facade",
    "UnknownSessionError": "kairox_core.facade",
    "Session": "kairox_core.session",
    "Turn": "kairox_core.session",
    "TurnResult": "kairox_core.session",
    "AssembledContext": "kairox_core.context.assembler",
    "ContextTrace": "kairox_core.context.trace",
    "SessionInfo": "kairox_core.store.event_rows",
    "Event": "kairox_core.events",
    "event_messages": "kairox_core.context.history",
    "UserMessageAdded": "kairox_core.events",
    "AssistantMessageCompleted": "kairox_core.events",
    "ToolInvocationCompleted": "kairox_core.events",
    "KairoxConfig": "kairox_core.config",
    "KairoxError": "kairox_core.errors",
    "KairoxUserError": "kairox_core.errors",
    "front_end_system_prompt": "kairox_core.prompt",
    "get_encoding": "kairox_core.tokens",
    "run_async": "kairox_core.sync",
    "run_sync": "kairox_core.sync",
}

__all__ = [
    "AssembledContext",
    "AssistantMessageCompleted",
    "ContextTrace",
    "Event",
    "Kairox",
    "KairoxConfig",
    "KairoxError",
    "KairoxUserError",
    "Session",
    "SessionInfo",
    "ToolInvocationCompleted",
    "Turn",
    "TurnResult",
    "UnknownSessionError",
    "UserMessageAdded",
    "__version__",
    "event_messages",
    "front_end_system_prompt",
    "get_encoding",
    "hookimpl",
    "run_async",
    "run_sync",
]

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.context.assembler import AssembledContext
    from kairox_core.context.history import event_messages
    from kairox_core.context.trace import ContextTrace
    from kairox_core.errors import KairoxError, KairoxUserError
    from kairox_core.events import (
        AssistantMessageCompleted,
        Event,
        ToolInvocationCompleted,
        UserMessageAdded,
    )
    from kairox_core.facade import Kairox, UnknownSessionError
    from kairox_core.prompt import front_end_system_prompt
    from kairox_core.session import Session, Turn, TurnResult
    from kairox_core.store.event_rows import SessionInfo
    from kairox_core.sync import run_async, run_sync
    from kairox_core.tokens import get_encoding


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kairox_core' has no attribute '{name}'")
    value = getattr(_import(module), name)
    globals()[name] = value  # asked once: a plain attribute from then on
    return value


def _import(module: str) -> ModuleType:
    """``module``, imported by name here so the import graph (tests/test_architecture.py)
    sees each edge."""
    match module:
        case "kairox_core.facade":
            from kairox_core import facade

            return facade
        case "kairox_core.session":
            from kairox_core import session

            return session
        case "kairox_core.context.assembler":
            from kairox_core.context import assembler

            return assembler
        case "kairox_core.context.trace":
            from kairox_core.context import trace

            return trace
        case "kairox_core.context.history":
            from kairox_core.context import history

            return history
        case "kairox_core.store.event_rows":
            from kairox_core.store import event_rows

            return event_rows
        case "kairox_core.events":
            from kairox_core import events

            return events
        case "kairox_core.config":
            from kairox_core import config

            return config
        case "kairox_core.errors":
            from kairox_core import errors

            return errors
        case "kairox_core.prompt":
            from kairox_core import prompt

            return prompt
        case "kairox_core.tokens":
            from kairox_core import tokens

            return tokens
        case "kairox_core.sync":
            from kairox_core import sync

            return sync
        case _:
            raise AssertionError(f"_LAZY names {module}, which _import does not know")
