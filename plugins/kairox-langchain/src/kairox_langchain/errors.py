"""The errors this adapter raises when Kairox and LangChain disagree: user errors, so
the CLI and the web app report them as what was wrong and how to fix it."""

from __future__ import annotations

from kairox_core import KairoxUserError


class UnsupportedMessageError(KairoxUserError):
    """A LangChain message Kairox cannot record as part of a turn."""


class UnknownNamespaceError(KairoxUserError):
    """A LangGraph store namespace that maps to no Kairox scope."""


class UnsupportedValueError(KairoxUserError):
    """A LangGraph store value or option Kairox cannot keep as given."""
