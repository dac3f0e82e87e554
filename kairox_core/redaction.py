"""Secret redaction: one ``redact(text)`` for every text that outlives its turn.

Summaries, recalled past turns and the long-term block are sent to the model on later
turns, so credentials that appeared in a conversation (a key pasted by the user, a
token echoed by a tool) are replaced by ``[REDACTED:<kind>]`` before they get there.
The event store keeps the originals (audit); only what is re-sent is redacted.

Patterns are anchored on the formats' own prefixes (``sk-``, ``AKIA``, ``glpat-``,
``-----BEGIN``, ``scheme://user:pass@``, ``password=``, "password is ...") so
ordinary prose, numbers, dates, hashes and ids pass through untouched. The vendor
formats follow detect-secrets' plugin regexes (Apache-2.0); the package itself is not
used: importing one of its plugins loads hundreds of modules (requests, yaml), and
its detectors yield values rather than spans and skip several shapes covered here
(``password=p@ssw0rd99``, passwords in prose). Redaction is idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Replacement = str | Callable[[re.Match[str]], str]

# A value after ``name=`` / ``name:``: quoted (anything up to the quote) or bare (up to
# whitespace, a closing quote, or trailing punctuation that ends the sentence).
_BARE = r"[^\s\"'`]{6,}?(?=[,;.)\]}]*(?:\s|$|[\"'`]))"
_QUOTED = r"\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'"
_NOT_DONE = r"(?!\[REDACTED)"
_SECRET_NAMES = (
    r"(?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|client[_-]?secret|secret[_-]?key|private[_-]?key|password|passwd|"
    r"passphrase|pwd|token|secret)"
)


def _tag(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _keep(kind: str, *groups: int) -> Callable[[re.Match[str]], str]:
    """A replacement that keeps groups (a prefix, a separator) around the tag."""

    def replace(m: re.Match[str]) -> str:
        head = "".join(m.group(g) or "" for g in groups)
        return f"{head}{_tag(kind)}"

    return replace


def _quoted_value(kind: str) -> Callable[[re.Match[str]], str]:
    """For ``(name)(sep)(value)``: keep name and separator, and the value's quotes."""

    def replace(m: re.Match[str]) -> str:
        value = m.group(3)
        quote = value[0] if value[:1] in {'"', "'"} and value[-1:] == value[:1] else ""
        return f"{m.group(1)}{m.group(2)}{quote}{_tag(kind or _kind(m.group(1)))}{quote}"

    return replace


def _prefixed(kind: str, pattern: str, flags: int = 0) -> tuple[str, re.Pattern[str], str]:
    """A token recognised by its own prefix, replaced whole."""
    return kind, re.compile(r"(?<![A-Za-z0-9_])(?:" + pattern + ")", flags), _tag(kind)


# (kind, pattern, replacement), applied in order: whole blocks and URLs before tokens,
# tokens before ``name=value`` assignments (so a token's tag says what it was).
_RULES: list[tuple[str, re.Pattern[str], Replacement]] = [
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
        # The password runs to the last ``@`` followed by a host (``p@ss/w0rd@db``); the
        # user part holds no ``/``, so ``https://example.com/a:b@c`` is left alone.
        "url_password",
        re.compile(
            r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@\[\]]+:)" + _NOT_DONE + r"\S{1,256}"
            r"(@)(?=[A-Za-z0-9.\-\[\]:]+(?:[/?#\s\"'<>),;]|$))"
        ),
        lambda m: f"{m.group(1)}{_tag('password')}{m.group(2)}",
    ),
    (
        "bearer",
        re.compile(r"\b(Bearer\s+)" + _NOT_DONE + r"[A-Za-z0-9._~+/-]{12,}=*", re.I),
        _keep("bearer_token", 1),
    ),
    (
        "basic_auth",
        re.compile(r"\b(Authorization:\s*Basic\s+)[A-Za-z0-9+/]{8,}=*", re.I),
        _keep("basic_auth", 1),
    ),
    _prefixed("stripe_key", r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|whsec_[0-9a-zA-Z]{24,}"),
    (
        "openai_key",
        re.compile(r"\bsk-(?:proj-|ant-(?:api\d\d-)?|live-|test-)?[A-Za-z0-9_-]{16,}"),
        _tag("api_key"),
    ),
    _prefixed("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}"),
    _prefixed(
        "gitlab_token",
        r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[A-Za-z0-9_\-]{20,}"
        r"|GR1348941[A-Za-z0-9_\-]{20,}",
    ),
    _prefixed("slack_token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    _prefixed(
        "slack_webhook",
        r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
    ),
    _prefixed("google_api_key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    _prefixed(
        "aws_access_key",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b",
    ),
    (
        "aws_secret_key",
        re.compile(
            r"\b((?:aws_?)?secret_?access_?key|aws_?secret(?:_?key)?)([\"']?\s*[:=]\s*|\s+)"
            r"([\"']?)" + _NOT_DONE + r"[A-Za-z0-9/+=]{40}\3",
            re.I,
        ),
        lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{_tag('aws_secret_key')}{m.group(3)}",
    ),
    _prefixed("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    _prefixed("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{70,}"),
    _prefixed("npm_token", r"npm_[A-Za-z0-9]{36}"),
    _prefixed("square_token", r"sq0(?:csp|atp)-[0-9A-Za-z_-]{22,}"),
    _prefixed("twilio_key", r"SK[0-9a-f]{32}\b"),
    _prefixed("discord_token", r"[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,}"),
    _prefixed("telegram_token", r"\d{8,10}:AA[0-9A-Za-z_-]{33}"),
    _prefixed("mailchimp_key", r"[0-9a-f]{32}-us[0-9]{1,2}\b"),
    (
        "azure_storage_key",
        re.compile(r"(AccountKey=)" + _NOT_DONE + r"[A-Za-z0-9+/=]{40,}"),
        _keep("azure_storage_key", 1),
    ),
    (
        # ``password=...``, ``"password": "..."``, ``api_key: ...``: the name is kept.
        "assignment",
        re.compile(
            r"\b(" + _SECRET_NAMES + r")([\"']?\s*(?:[:=]|:=|=>)\s*)" + _NOT_DONE + r"("
            r"" + _QUOTED + "|" + _BARE + ")",
            re.I,
        ),
        _quoted_value(""),
    ),
    (
        # A password written in prose: "my password is Tr0ub4dor&3", "the password for
        # the db was 'correct horse'". A bare word counts only with a letter and a digit.
        "prose_password",
        re.compile(
            r"\b((?:password|passwd|passphrase|passcode)(?:\s+(?:for|of|to|on)\s+"
            r"[\w.@/-]+(?:\s+[\w.@/-]+)?)?)(\s+(?:is|was|reads|will be|is now|=)\s+)"
            + _NOT_DONE
            + r"("
            + _QUOTED
            + r"|(?=[^\s\"'`]*[A-Za-z])(?=[^\s\"'`]*\d)"
            + _BARE
            + ")",
            re.I,
        ),
        _quoted_value("password"),
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


def redact(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by
    ``[REDACTED:<kind>]``: call it on anything re-sent to a model from storage."""
    for _kind_name, pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


redact_secrets = redact  # the name the compaction strategies have always used

__all__ = ["KINDS", "redact", "redact_secrets"]
