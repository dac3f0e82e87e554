"""The stand-in OpenAI server keeps a client's dropped connection out of stderr (the
README examples' tests read any stderr as a quiet failure), and still prints real
errors."""

from __future__ import annotations

import pytest

from kairox_core.testing.fake_openai import FakeOpenAIServer


def test_a_reset_connection_is_not_printed_a_real_error_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = FakeOpenAIServer().start()
    httpd = fake._httpd
    assert httpd is not None
    try:
        for exc in (ConnectionResetError(104, "reset by peer"), BrokenPipeError(32, "pipe")):
            try:
                raise exc
            except ConnectionError:
                httpd.handle_error(None, ("127.0.0.1", 1))
        try:
            raise ValueError("a real bug in a handler")
        except ValueError:
            httpd.handle_error(None, ("127.0.0.1", 1))
    finally:
        fake.stop()
    err = capsys.readouterr().err
    assert "ConnectionResetError" not in err and "BrokenPipeError" not in err
    assert "ValueError: a real bug in a handler" in err
