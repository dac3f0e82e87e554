"""Taint detection for memory proposals (implemented next to the marker parser)."""

from __future__ import annotations

from kairox_core.markers.taint import is_tainted

__all__ = ["is_tainted"]
