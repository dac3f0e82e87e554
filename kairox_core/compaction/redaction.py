"""Secret redaction for summaries: the core's ``kairox_core.redaction``, under the name
the compaction strategies import (one implementation for summaries, recall and the
long-term block)."""

from __future__ import annotations

from kairox_core.redaction import KINDS, redact, redact_secrets

__all__ = ["KINDS", "redact", "redact_secrets"]
