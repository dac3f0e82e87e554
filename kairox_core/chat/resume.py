"""How to come back to a chat: printed on exit by both front ends, since a session id
is otherwise only visible in ``kairox sessions``."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def resume_hint(session_id: str, global_args: Sequence[str] = ()) -> str:
    """``session ID; resume it with: kairox [--config ...] chat --session ID``.

    ``global_args`` are the ``--config``/``--db`` options given on the command line, so
    the command finds the same database again."""
    command = shlex.join(["kairox", *global_args, "chat", "--session", session_id])
    return f"session {session_id}; resume it with: {command}"
