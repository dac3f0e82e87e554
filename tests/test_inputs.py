"""Input edges through the Python API and the CLI: lone surrogates refused (a person's
text) or replaced (a model's or a tool's), keys and ids by one set of rules
(kairox_core/inputs.py), searches bounded. The web routes: tests_web/test_inputs.py;
MCP over stdio: test_mcp_server.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.cli import main
from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxUserError
from kairox_core.events import AssistantMessageCompleted, ToolInvocationCompleted
from kairox_core.inputs import (
    InvalidInputError,
    check_id,
    check_key,
    check_text,
    clean_text,
    json_problem,
)
from kairox_core.markers._grammar import KEY_RE as MARKER_KEY_RE

ANY_CHAR = st.characters(codec=None, categories=None)  # lone surrogates included


@given(st.text())
def test_valid_text_passes_unchanged(text: str) -> None:
    assert check_text(text, "x") is text
    assert clean_text(text) == text


@given(st.text(alphabet=ANY_CHAR))
def test_clean_text_always_encodes_and_keeps_the_length(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    assert len(cleaned) == len(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            check_text(text, "x")


def test_messages_say_where_and_what() -> None:
    with pytest.raises(InvalidInputError, match=r"^the prompt .* U\+D800 at character 3 "):
        check_text("abc\ud800", "the prompt")
    with pytest.raises(InvalidInputError, match="byte 0xE9, which is not UTF-8"):
        check_text("caf\udce9", "the body")  # how Python decodes a latin-1 argv byte


@pytest.mark.parametrize("key", ["editor", "deploy.day", "a:b-c_d", "x" * 128])
def test_keys_the_marker_grammar_allows(key: str) -> None:
    assert check_key(key) == key and MARKER_KEY_RE.fullmatch(key)


@pytest.mark.parametrize("key", ["", " ", "two words", "<b>", "x" * 129, "é", "a/b", "k\n"])
def test_keys_nobody_accepts(key: str) -> None:
    with pytest.raises(InvalidInputError, match="no spaces or markup"):
        check_key(key)
    assert not MARKER_KEY_RE.fullmatch(key)


@pytest.mark.parametrize(
    "bad", ["", "a/b", "_memory:user", "_packs", "a b", "<x>", "-x", "x" * 129]
)
def test_ids_nobody_accepts(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="session id"):
        check_id(bad, "session id")


def test_json_problems_name_their_path() -> None:
    assert json_problem({"a": [1, {"b": float("nan")}]}) == (
        "$.a[1].b: nan is not a number JSON allows (finite numbers only)"
    )
    assert (
        json_problem({"k": 2**63}) == "$.k: the integer 9223372036854775808 does not fit in 64 bits"
    )
    assert json_problem({"k": -(2**63), "ok": [True, None, 1.5, "é"]}) is None
    assert json_problem(["\udc80"]) is not None and json_problem({"\ud800": 1}) is not None


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    config = KairoxConfig.model_validate({"retrieval": {"workspace_index": False}})
    with Kairox.open(tmp_path / "k.db", config) as kx:
        yield kx


def test_a_prompt_with_a_lone_surrogate_is_refused_and_nothing_recorded(kx: Kairox) -> None:
    s = kx.session(workspace="w")
    before = len(kx.events(s.id))
    with pytest.raises(InvalidInputError, match="the prompt is not valid Unicode"):
        s.run_turn_sync("hi \ud800", "ok")
    with pytest.raises(InvalidInputError, match="attachments"):
        s.begin_turn_sync("hi", [{"name": "a.txt", "text": "\udfff"}])
    assert len(kx.events(s.id)) == before and not s.busy
    result = s.run_turn_sync("hi", "fine")  # the session is free
    assert result.text == "fine"


def test_a_model_reply_or_tool_result_with_one_is_kept_with_a_replacement(kx: Kairox) -> None:
    s = kx.session(workspace="w")
    tool = {"tool_call_id": "c1", "tool_name": "t\ud800", "result": "r\udfff"}
    result = s.run_turn_sync(
        "hi", "ok \ud800 <memory scope='session'>x\udc80y</memory>", tool_results=[tool]
    )
    assert result.text.startswith("ok \ufffd")
    events = kx.events(s.id)
    reply = next(e for e in events if isinstance(e, AssistantMessageCompleted))
    call = next(e for e in events if isinstance(e, ToolInvocationCompleted))
    assert reply.text.startswith("ok \ufffd") and (call.tool_name, call.result) == (
        "t\ufffd",
        "r\ufffd",
    )
    assert [m.body for m in kx.memories.list("session", session_id=s.id)] == ["x\ufffdy"]


def test_session_and_workspace_ids_follow_the_shared_rules(kx: Kairox) -> None:
    for bad in ("a/b", "_memory:user", "", "a b"):
        with pytest.raises(InvalidInputError, match="session id"):
            kx.session(session_id=bad)
        with pytest.raises(InvalidInputError, match="workspace id"):
            kx.session(workspace=bad)
    assert kx.sessions() == []
    assert kx.session(session_id="chat-1", workspace="w.1").id == "chat-1"
    assert kx.session(session_id="chat-1").workspace_id == "w.1"  # resumed


def test_every_text_entry_refuses_a_lone_surrogate(kx: Kairox) -> None:
    s = kx.session(workspace="w")
    for write in (
        lambda: s.pin_fact_sync("pin \ud800"),
        lambda: kx.longterm.add("chunk \ud800", scope="global"),
        lambda: kx.packs.create("p", text="pack \ud800"),
        lambda: kx.approvals.remember("user", "k", "body \ud800"),
        lambda: kx.longterm.search("q \ud800", session_id=s.id, workspace_id="w"),
    ):
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            write()
    with pytest.raises(InvalidInputError, match="workspace id 'a/b'"):
        kx.longterm.add("a fact", scope="project", workspace_id="a/b")
    with pytest.raises(KairoxUserError, match="k must be between 0 and 1000"):
        kx.longterm.search("q", session_id=s.id, workspace_id="w", k=10**12)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["memory", "add", "caf\udce9", "--key", "k"], "byte 0xE9, which is not UTF-8"),
        (["memory", "add", "b", "--key", "my key"], "no spaces or markup"),
        (["memory", "add", "b", "--key", "<k>"], "no spaces or markup"),
        (["memory", "add", "b", "--scope", "session", "--session", "ghost"], "no session 'ghost'"),
        (["memory", "add", "b", "--scope", "session", "--session", "a/b"], "session id 'a/b'"),
        (["memory", "add", "b", "--key", "k", "--scope", "workspace", "--workspace", "_x"], "_x"),
        (["longterm", "add", "--scope", "global", "x\udcff"], "byte 0xFF"),
        (["pack", "create", "p", "--text", "x\udcff"], "byte 0xFF"),
    ],
)
def test_the_cli_refuses_with_exit_2(
    kairox_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, err = run(["--db", str(tmp_path / "k.db"), *args], capsys)
    assert code == 2 and message in err and "Traceback" not in err, err
