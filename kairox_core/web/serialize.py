"""Core objects as JSON for the API: each object's own ``as_dict`` where it has one."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox_core.events import Event
    from kairox_core.memory.records import MemoryRecord, Proposal


def _plain(value: Any) -> Any:
    if isinstance(value, Enum) and not isinstance(value, (str, int, float)):
        return value.value  # an Enum that JSON would not write as its value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def event_json(event: Event) -> dict[str, Any]:
    """An event with its type, seq and payload (``Event.to_dict``)."""
    data: dict[str, Any] = event.to_dict()
    return data


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    data: dict[str, Any] = proposal.as_dict()
    return data


def memory_json(record: MemoryRecord) -> dict[str, Any]:
    data: dict[str, Any] = record.as_dict()
    return data


def plain(value: Any) -> Any:
    """Any dataclass (a memory version, a summary item, a session info) as JSON."""
    return _plain(value)
