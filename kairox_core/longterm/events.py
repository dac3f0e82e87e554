"""Events of the Kenaz layers: long-term chunks and context packs.

Defined here, not in kairox_core/events.py, and registered by name like the core's, so
the event store loads them as these types once this package is imported (the facade
imports it; without it they load as ``GenericEvent``, never crash).

Which session an event is written to (the audit trail of that session):
- a chunk's events go to the session that wrote it (``Chunk.session_id``: always set for
  a ``session`` chunk; set for a project/global chunk written from inside a session);
  a project or global chunk written outside any session (the CLI) goes to the
  maintenance session ``_longterm:<workspace>`` or ``_longterm:global``;
- pack events go to ``_packs`` (a pack belongs to no session and no workspace).
"""

from __future__ import annotations

from dataclasses import dataclass

from kairox_core.events import Event, register_event

LONGTERM_MAINTENANCE_PREFIX = "_longterm:"
PACKS_SESSION = "_packs"


@register_event
@dataclass(frozen=True, kw_only=True)
class LongTermChunkAdded(Event):
    chunk_id: str
    scope: str  # session | project | global
    text: str
    workspace_id: str | None = None
    origin_session_id: str | None = None  # the session that wrote it, if any
    source_seq: int | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class LongTermChunkEdited(Event):
    chunk_id: str
    scope: str
    text: str
    previous_text: str


@register_event
@dataclass(frozen=True, kw_only=True)
class LongTermChunkDeleted(Event):
    chunk_id: str
    scope: str
    text: str  # the last text, so the audit trail keeps it
    workspace_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class PackCreated(Event):
    name: str
    level: str
    text: str
    draft: bool = False


@register_event
@dataclass(frozen=True, kw_only=True)
class PackEdited(Event):
    name: str
    level: str
    text: str
    previous_text: str


@register_event
@dataclass(frozen=True, kw_only=True)
class PackPromoted(Event):
    """Chunks copied into a draft personal pack (the chunks themselves stay)."""

    name: str
    chunk_ids: tuple[str, ...]
    text: str  # the pack's whole text after the promotion


@register_event
@dataclass(frozen=True, kw_only=True)
class PackPublished(Event):
    name: str
    level: str  # the new level: team or org
    previous_level: str
    published_by: str


@register_event
@dataclass(frozen=True, kw_only=True)
class PackActivated(Event):
    name: str
    workspace_id: str | None = None  # None: every workspace
    active: bool = True  # False: deactivated


@register_event
@dataclass(frozen=True, kw_only=True)
class PackDeleted(Event):
    name: str
    level: str
    text: str


def chunk_home_session(scope: str, session_id: str | None, workspace_id: str | None) -> str:
    """The session a chunk's events are written to (see the module docstring)."""
    if session_id:
        return session_id
    if scope == "project":
        return f"{LONGTERM_MAINTENANCE_PREFIX}{workspace_id}"
    return f"{LONGTERM_MAINTENANCE_PREFIX}global"
