"""Slash commands typed into the chat: parsed here, run by the chat front ends.

``/remember TEXT`` keeps a long-term chunk (scope ``session`` unless ``--scope project``
or ``global``): recalled later when a prompt is about it. The exact keyed records of
before stay one flag away: ``--key KEY`` or ``--scope user|workspace`` writes a keyed
memory (accepted at once), injected into every turn whatever the prompt.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from kairox_core.errors import KairoxUserError

HELP = """\
/remember TEXT [--scope session|project|global]    keep TEXT long-term (recalled when relevant)
/remember TEXT --key KEY [--scope user|workspace]  a keyed memory instead (always injected)
/attach PATH                                       a file (image, PDF, text) for your next message
/compact                                           compact this session's older history now
/profile NAME                                      switch to another profile (or alias)
/help                                              this help
Anything else is sent to the model."""

KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class SlashError(KairoxUserError):
    """A malformed slash command; the message says how to write it."""


@dataclass(frozen=True)
class Remember:
    text: str
    scope: str = "user"
    key: str | None = None


@dataclass(frozen=True)
class RememberChunk:
    """Keep ``text`` as a long-term chunk (kx.longterm)."""

    text: str
    scope: str = "session"


@dataclass(frozen=True)
class Compact:
    pass


@dataclass(frozen=True)
class SwitchProfile:
    name: str


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Attach:
    """Attach the file at ``path`` to the next message (kairox_core.attachments)."""

    path: str


SlashCommand = Remember | RememberChunk | Compact | SwitchProfile | Help | Attach
KEYED_SCOPES = ("user", "workspace")
CHUNK_SCOPES = ("session", "project", "global")
USAGE = (
    "usage: /remember TEXT [--scope session|project|global], or "
    "/remember TEXT --key KEY [--scope user|workspace] for a keyed memory"
)


def derive_key(text: str) -> str:
    """A readable key from the first words of a memory, e.g. ``prefers-window-seats``."""
    words = re.findall(r"[A-Za-z0-9]+", text.lower())[:5]
    return "-".join(words)[:64] or "note"


def parse_slash(line: str) -> SlashCommand | None:
    """The command in ``line``, or None when it is a prompt for the model."""
    stripped = line.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    try:
        parts = shlex.split(stripped)
    except ValueError as exc:
        raise SlashError(f"cannot parse '{stripped}': {exc}") from None
    name, args = parts[0].lower(), parts[1:]
    if name == "/help":
        return Help()
    if name == "/compact":
        if args:
            raise SlashError("/compact takes no arguments")
        return Compact()
    if name == "/profile":
        if len(args) != 1:
            raise SlashError("usage: /profile NAME")
        return SwitchProfile(args[0])
    if name == "/remember":
        return _parse_remember(args)
    if name == "/attach":
        if len(args) != 1:
            raise SlashError(
                'usage: /attach PATH (quote a path with spaces: /attach "my file.pdf")'
            )
        return Attach(args[0])
    raise SlashError(f"unknown command {name}; type /help for the list")


def _parse_remember(args: list[str]) -> Remember | RememberChunk:
    scope: str | None = None
    key: str | None = None
    words: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in ("--scope", "--key"):
            value = next(it, None)
            if value is None:
                raise SlashError(f"{arg} needs a value; {USAGE}")
            if arg == "--scope":
                if value not in KEYED_SCOPES + CHUNK_SCOPES:
                    raise SlashError(
                        f"--scope must be session, project or global (long-term), or user "
                        f"or workspace (keyed), not '{value}'"
                    )
                scope = value
            else:
                if not KEY_RE.match(value):
                    raise SlashError(
                        f"--key '{value}' is not a valid key: use letters, digits "
                        "and . _ : - (at most 128)"
                    )
                key = value
        else:
            words.append(arg)
    text = " ".join(words).strip()
    if not text:
        raise SlashError(USAGE)
    if key is None and (scope is None or scope in CHUNK_SCOPES):
        return RememberChunk(text=text, scope=scope or "session")
    if scope in CHUNK_SCOPES:
        raise SlashError(f"--key makes a keyed memory: its scope is user or workspace; {USAGE}")
    return Remember(text=text, scope=scope or "user", key=key or derive_key(text))
