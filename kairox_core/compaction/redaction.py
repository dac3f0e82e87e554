"""Secret redaction for summaries, applied before anything is stored.

A summary outlives the turn it came from and is sent to the model on every later
turn, so credentials that appeared in a conversation (a key pasted by the user, a
token echoed by a tool) are replaced by ``[REDACTED:<kind>]``. Patterns are anchored
on the formats' own prefixes (``sk-``, ``AKIA``, ``ghp_``, ``-----BEGIN``, ``scheme://
user:pass@``, ``api_key=``...) so ordinary prose, numbers, dates, hashes and ids pass
through untouched. Redaction is idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_VALUE = r"[A-Za-z0-9_\-./+=~]"


def _tag(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (kind, pattern, replacement); a replacement that keeps a prefix uses group 1.
_RULES: list[tuple[str, re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|.*\Z)",
            re.S,
        ),
        _tag("private_key"),
    ),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        _tag("jwt"),
    ),
    (
        "url_password",
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@\[\]]+:)(?!\[REDACTED)[^\s/@]+(@)"),
        lambda m: f"{m.group(1)}{_tag('password')}{m.group(2)}",
    ),
    (
        "bearer",
        re.compile(r"\b(Bearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/-]{12,}=*", re.I),
        lambda m: f"{m.group(1)}{_tag('bearer_token')}",
    ),
    (
        "basic_auth",
        re.compile(r"\b(Authorization:\s*Basic\s+)[A-Za-z0-9+/]{8,}=*", re.I),
        lambda m: f"{m.group(1)}{_tag('basic_auth')}",
    ),
    (
        "openai_key",
        re.compile(
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|live-|test-)?"
            r"[A-Za-z0-9_-]{16,}"
        ),
        _tag("api_key"),
    ),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})"),
        _tag("github_token"),
    ),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), _tag("slack_token")),
    (
        "google_api_key",
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
        _tag("google_api_key"),
    ),
    (
        "aws_access_key",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b"),
        _tag("aws_access_key"),
    ),
    (
        "aws_secret_key",
        re.compile(
            r"\b((?:aws_?)?secret_?access_?key|aws_?secret(?:_?key)?)(\s*[:=]\s*|\s+)"
            r"([\"']?)(?!\[REDACTED)[A-Za-z0-9/+=]{40}\3",
            re.I,
        ),
        lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{_tag('aws_secret_key')}{m.group(3)}",
    ),
    (
        "assignment",
        re.compile(
            r"\b((?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|"
            r"refresh[_-]?token|client[_-]?secret|secret[_-]?key|password|passwd|pwd|token|"
            r"secret))(\s*[:=]\s*)([\"']?)(?!\[REDACTED)(" + _VALUE + r"{6,})\3",
            re.I,
        ),
        lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{_tag(_kind(m.group(1)))}{m.group(3)}",
    ),
]


def _kind(name: str) -> str:
    lowered = name.lower().replace("-", "_")
    if "pass" in lowered or lowered.endswith("pwd"):
        return "password"
    if "token" in lowered:
        return "token"
    if "key" in lowered:
        return "api_key"
    return "secret"


KINDS = tuple(kind for kind, _, _ in _RULES)


def redact_secrets(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by
    ``[REDACTED:<kind>]``."""
    for _kind_name, pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
