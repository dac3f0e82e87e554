"""Secret redaction in summaries: each format, idempotence, and no false positives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.compaction.redaction import redact_secrets

SECRETS = [
    ("sk-abcdefghijklmnopqrstuvwx12", "api_key"),
    ("sk-proj-Ab3_dEf-GhIjKlMnOpQrStUvWxYz0123", "api_key"),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "api_key"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("ASIAY34FZKBOKMUTVV7A", "aws_access_key"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrs", "github_token"),
    ("xoxb-123456789012-abcdefghijklmnop", "slack_token"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlF", "jwt"),
]


@pytest.mark.parametrize(("secret", "kind"), SECRETS)
def test_known_formats_are_redacted(secret: str, kind: str) -> None:
    out = redact_secrets(f"Here it is: {secret} (keep it safe).")
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert out.startswith("Here it is: ") and out.endswith(" (keep it safe).")


def test_bearer_token_keeps_the_scheme() -> None:
    out = redact_secrets("Authorization: Bearer abc.DEF-ghi_jkl12345678")
    assert out == "Authorization: Bearer [REDACTED:bearer_token]"


def test_password_in_url_keeps_user_and_host() -> None:
    out = redact_secrets("connect to postgres://admin:s3cr3t!x@db.example.com:5432/app now")
    assert out == "connect to postgres://admin:[REDACTED:password]@db.example.com:5432/app now"
    assert redact_secrets("see https://example.com/a:b@c") == "see https://example.com/a:b@c"


def test_private_key_block_is_removed_whole() -> None:
    block = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----"
    )
    assert redact_secrets(f"key:\n{block}\ndone") == "key:\n[REDACTED:private_key]\ndone"
    assert "MIIE" not in redact_secrets("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKC")


def test_assignments_keep_the_name() -> None:
    out = redact_secrets(
        "api_key=abcd1234efgh, password: 'hunter22', "
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    )
    assert out == (
        "api_key=[REDACTED:api_key], password: '[REDACTED:password]', "
        "aws_secret_access_key = [REDACTED:aws_secret_key]"
    )


def test_prose_numbers_dates_and_ids_are_untouched() -> None:
    text = (
        "On 2024-03-15 at 10:30 we spent $1,234.56 on 3 items (order #98765). "
        "Commit 3f2a9c1d0e4b; id 123e4567-e89b-12d3-a456-426614174000; "
        "call +1 555 0100. The token bucket is full, the secret is out, ask the key "
        "person; skip-list and task-force stay; see http://example.com:8080/path."
    )
    assert redact_secrets(text) == text


WORDS = (
    "the a we token key secret password api meeting on at 2024-05-01 10:30 42 3.14 "
    "Monday Dana budget skip task-list risk ask AKA http://example.com is was"
)
words = st.sampled_from(WORDS.split(" "))


@given(st.lists(words, max_size=40).map(" ".join))
def test_no_false_positives_on_prose(text: str) -> None:
    assert redact_secrets(text) == text


@given(
    st.lists(st.one_of(words, st.sampled_from([s for s, _ in SECRETS])), max_size=30).map(" ".join)
)
def test_redaction_is_complete_and_idempotent(text: str) -> None:
    out = redact_secrets(text)
    for secret, _ in SECRETS:
        assert secret not in out
    assert redact_secrets(out) == out
