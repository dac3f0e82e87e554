"""Planted secrets: redacted wherever stored text is re-sent (summaries, recalled
turns), kept verbatim in the audit trail."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)
from kairox_core.facade import Kairox
from kairox_core.redaction import redact

# (what is said, the part that must never come back)
PLANTED = {
    "openai": ("sk-proj-Ab3dEfGhIjKlMnOpQrStUvWxYz0123", "Ab3dEfGhIjKl"),
    "aws_access": ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws_secret": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    "github": ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij"),
    "slack": ("xoxb-123456789012-abcdefghijklmnop", "xoxb-123456789012"),
    "stripe": ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWD"),
    "gitlab": ("glpat-Xy9kLmNoPqRsTuVwZa12", "Xy9kLmNoPq"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlF",
        "dozjgNryP4J3",
    ),
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7bq",
    ),
    "url_password": ("postgres://admin:Zq/9x!Lp2w@db.internal:5432/app", "Zq/9x!Lp2w"),
    "json_password": ('{"user": "dana", "password": "Qv7 horse battery"}', "Qv7 horse"),
    "prose_password": ("my password for the vpn is Tr0ub4dor&3", "Tr0ub4dor"),
    "at_password": ("password=p@ssw0rd99", "ssw0rd99"),
}
FILLER = "Let us talk about the garden, the weather and what to plant next spring."


def test_each_planted_secret_is_redacted_and_the_rest_kept() -> None:
    for name, (said, secret) in PLANTED.items():
        out = redact(f"For the deploy ({name}): {said} (keep it safe).")
        assert secret not in out, name
        assert "[REDACTED:" in out, name
        assert out.startswith(f"For the deploy ({name}): "), name
        assert redact(out) == out, name


def test_redaction_keeps_names_users_hosts_and_quotes() -> None:
    assert redact('{"password": "Qv7 horse battery"}') == '{"password": "[REDACTED:password]"}'
    assert (
        redact("mysql://root:p@ss/w0rd@db:3306/x") == "mysql://root:[REDACTED:password]@db:3306/x"
    )
    assert redact("password=p@ssw0rd99.") == "password=[REDACTED:password]."
    assert redact("the password is Tr0ub4dor&3, ok") == "the password is [REDACTED:password], ok"
    for prose in ("the password is long", "the password was changed on 2024-05-01"):
        assert redact(prose) == prose


def test_no_planted_secret_reaches_a_prompt_after_compaction(tmp_path: Path) -> None:
    cfg = KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=8000, reserve=200
            )
        },
        retrieval=RetrievalSection(backend="hashing", share=0.6),
        compaction=CompactionSection(keep_recent_exchanges=2),
        recall=RecallSection(k=40),
    )
    with Kairox.open(tmp_path / "kx.db", cfg) as kx:
        session = kx.session()
        for name, (said, _) in PLANTED.items():
            session.run_turn_sync(f"Remember the {name} credential: {said}", f"Stored: {said}")
        for i in range(4):
            session.run_turn_sync(f"turn {i}: {FILLER}", f"Noted {i}. {FILLER}")
        kx.compact(session.id)
        assert session.refresh_compaction().covered_ranges()
        turn = session.begin_turn_sync(
            "What were the openai, aws, github, slack, stripe, gitlab, jwt, private key, "
            "postgres url, json, vpn and password credentials I asked you to remember?"
        )
        try:
            sent = "\n".join(str(m["content"]) for m in turn.messages)
        finally:
            turn.abort_sync()
        recalled = [i for i in turn.trace.layer("retrieval").included if i.source == "recall"]
        assert len(recalled) >= 5  # the planted turns did come back, redacted
        assert "[REDACTED:" in sent
        leaked = [name for name, (_, secret) in PLANTED.items() if secret in sent]
        assert leaked == []
        stored = "\n".join(getattr(e, "text", "") or "" for e in kx.events(session.id))
        assert all(secret in stored for _, secret in PLANTED.values())  # audit keeps them


def test_events_help_says_the_audit_trail_keeps_the_originals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kairox_core.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["events", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "keeps the originals verbatim, secrets included" in out
