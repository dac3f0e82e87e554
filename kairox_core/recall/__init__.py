"""Recall of past turns: the built-in ``recall`` engine (every turn of a session
indexed, the best ones the history lacks recalled per prompt; ``engine.py``) and the
optional reordering of what it finds (``rank.py``). Configured by ``[recall]``."""

from __future__ import annotations

from kairox_core.recall.engine import (
    DOC_TYPE,
    SOURCE,
    Recall,
    recall_of,
    recall_space,
    turn_document,
    turn_text,
)

__all__ = [
    "DOC_TYPE",
    "SOURCE",
    "Recall",
    "recall_of",
    "recall_space",
    "turn_document",
    "turn_text",
]
