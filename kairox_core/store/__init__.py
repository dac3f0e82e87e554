"""SQLite storage: the connection factory, migrations, the event and memory stores."""

from __future__ import annotations

from kairox_core.store.connection import connect, transaction

__all__ = ["connect", "transaction"]
