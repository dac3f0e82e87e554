"""``kairox serve`` on the command line: help, and refusals that need no web stack.

The server itself is tested end to end in tests_web/ (``nox -s web``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.cli import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_says_what_it_serves(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["serve", "--help"], capsys)
    assert code == 0
    assert "/v1/chat/completions" in out and "--token" in out and "127.0.0.1" in out


def test_non_loopback_bind_without_a_token_exits_2(
    kairox_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAIROX_SERVE_TOKEN", raising=False)
    code, _, err = run(["serve", "--host", "0.0.0.0"], capsys)
    assert code == 2
    assert "a token is required" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("token", "message"),
    [("short", "16 to 512 characters"), ("$env:KAIROX_TEST_NO_SUCH_VAR", "is not set")],
)
def test_bad_tokens_exit_2(
    kairox_home: Path, capsys: pytest.CaptureFixture[str], token: str, message: str
) -> None:
    code, _, err = run(["serve", "--token", token], capsys)
    assert code == 2 and message in err


def test_a_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from kairox_core.cli.serve_cmd import resolve_token

    monkeypatch.setenv("KAIROX_TEST_TOKEN", "abcdefghijklmnop-0123")
    assert resolve_token("$env:KAIROX_TEST_TOKEN") == "abcdefghijklmnop-0123"
    assert resolve_token(None) is None


@pytest.mark.parametrize(
    "host", ["127.0.0.1.evil.example", "127.evil.example", "127.0.0.1.nip.io", "0.0.0.0", "::"]
)
@pytest.mark.parametrize("command", [["serve"], ["mcp", "serve", "--http"]])
def test_a_name_that_only_looks_loopback_needs_a_token(
    kairox_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    host: str,
    command: list[str],
) -> None:
    monkeypatch.delenv("KAIROX_SERVE_TOKEN", raising=False)
    monkeypatch.delenv("KAIROX_MCP_TOKEN", raising=False)
    code, _, err = run([*command, "--host", host], capsys)
    assert code == 2
    assert "is not a loopback address" in err and "a token is required" in err
    assert "Traceback" not in err


def test_mcp_serve_http_options_need_http(
    kairox_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in (["--host", "127.0.0.1"], ["--max-body", "4096"]):
        code, _, err = run(["mcp", "serve", *option], capsys)
        assert code == 2 and "needs --http" in err


def test_mcp_serve_checks_its_token(kairox_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["mcp", "serve", "--http", "--token", "short"], capsys)
    assert code == 2 and "16 to 512 characters" in err
