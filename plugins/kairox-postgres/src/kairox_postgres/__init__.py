"""kairox-postgres: the whole Kairox store on a PostgreSQL server shared by a team."""

from __future__ import annotations

__all__: list[str] = []
