"""A long PDF: sent whole with the turn that attaches it, then a one-paragraph synopsis
(the compaction model's, else the extractive digest) in later turns and summaries; the
original stays on the message."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core.attachments import from_path
from kairox_core.cli.compaction_cmd import describe_attachment
from kairox_core.config import parse_config
from kairox_core.events import CompactionSummary, UserMessageAdded
from kairox_core.facade import Kairox
from kairox_core.testing.fake_openai import Action, FakeOpenAIServer
from kairox_core.testing.files import pdf_with

PAGES = [
    f"Page {i}: the Orion project spent {i * 1000} dollars in week {i} and Dana approved it."
    for i in range(1, 13)
]
PARAGRAPH = "The Orion report lists weekly spending approved by Dana, 1000 to 12000 dollars."


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "report.pdf").write_bytes(pdf_with(PAGES))
    return from_path(tmp_path / "report.pdf")


def open_kx(tmp_path: Path, **compaction: Any) -> Kairox:
    config = parse_config(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 16000}},
            "compaction": {"attachment_max_tokens": 60, "keep_recent_exchanges": 1, **compaction},
            "retrieval": {"workspace_index": False},
        }
    )
    return Kairox.open(tmp_path / "kx.db", config)


def stored(kx: Kairox, sid: str) -> list[UserMessageAdded]:
    return [e for e in kx.events(sid) if isinstance(e, UserMessageAdded)]


def test_without_a_model_the_synopsis_is_the_digest_and_the_original_stays(
    tmp_path: Path, kairox_home: Path, report: dict[str, Any]
) -> None:
    kx = open_kx(tmp_path)
    s = kx.session(workspace="w")
    first = s.begin_turn_sync("summarise the report", [report])
    assert PAGES[-1] in first.messages[-1]["content"]  # the new prompt: the whole text
    first.feed("Done.")
    first.complete_sync()
    later = s.begin_turn_sync("what did week 12 cost?")
    older = later.messages[-3]["content"]
    assert "[attachment document report.pdf (synopsis; read whole when attached)]" in older
    assert "[document summarised:" in older and PAGES[5] not in older
    later.abort_sync()

    (asked, _) = stored(kx, s.id)
    (att,) = asked.attachments
    assert att["synopsis_by"] == "extractive digest"
    assert att["text"] == "\n\n".join(PAGES)  # the whole text and the original file stay
    assert base64.b64decode(att["data"]) == (tmp_path / "report.pdf").read_bytes()
    assert describe_attachment(att).startswith("report.pdf (application/pdf, 12 pages, ")
    assert "original kept" in describe_attachment(att)
    kx.close()


def test_a_short_document_travels_whole(tmp_path: Path, kairox_home: Path) -> None:
    kx = open_kx(tmp_path)
    s = kx.session(workspace="w")
    s.run_turn_sync(
        "note",
        "ok",
        attachments=[{"kind": "document", "filename": "n.txt", "text": "ship on Friday"}],
    )
    (asked,) = stored(kx, s.id)
    assert "synopsis" not in asked.attachments[0]
    kx.close()


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    def reply(messages: list[dict[str, Any]]) -> str:
        if "synopsis" in str(messages[0]["content"]):
            return PARAGRAPH
        return "The user shared the Orion report."  # a compaction summary

    with FakeOpenAIServer(reply=reply) as fake:
        yield fake


def with_model(tmp_path: Path, model: FakeOpenAIServer) -> Kairox:
    config = parse_config(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 16000}},
            "providers": {
                "small": {"kind": "openai", "model": "fake-model", "base_url": model.base_url}
            },
            "compaction": {
                "strategy": "model",
                "provider": "small",
                "attachment_max_tokens": 60,
                "keep_recent_exchanges": 1,
            },
            "retrieval": {"workspace_index": False},
        }
    )
    return Kairox.open(tmp_path / "kx.db", config)


def test_the_compaction_model_writes_the_synopsis_and_summaries_carry_it(
    tmp_path: Path, kairox_home: Path, report: dict[str, Any], model: FakeOpenAIServer
) -> None:
    kx = with_model(tmp_path, model)
    s = kx.session(workspace="w")
    s.run_turn_sync("summarise the report", "Done.", attachments=[report])
    (asked,) = model.requests
    sent = asked.body["messages"]
    assert "one paragraph" in sent[0]["content"]
    assert "Document report.pdf, 12 pages:" in sent[1]["content"]
    assert PAGES[0] in sent[1]["content"] and PAGES[-1] in sent[1]["content"]
    (att,) = stored(kx, s.id)[0].attachments
    assert (att["synopsis"], att["synopsis_by"]) == (PARAGRAPH, "model fake-model")

    s.run_turn_sync("thanks", "You're welcome.")
    older = s.preview_sync("next").messages[-5]["content"]
    assert older.startswith("summarise the report") and PARAGRAPH in older
    assert PAGES[5] not in older

    outcome = kx.compact(s.id)
    assert outcome.ok, outcome
    transcript = model.requests[-1].body["messages"][1]["content"]
    assert f"[document report.pdf, synopsis]\n{PARAGRAPH}" in transcript
    assert PAGES[5] not in transcript
    assert any(isinstance(e, CompactionSummary) for e in kx.events(s.id))
    kx.close()


def test_a_failing_model_leaves_the_digest_and_says_why(
    tmp_path: Path, kairox_home: Path, report: dict[str, Any], model: FakeOpenAIServer
) -> None:
    model.script(Action(status=400, message="model overloaded"))
    kx = with_model(tmp_path, model)
    s = kx.session(workspace="w")
    s.run_turn_sync("summarise the report", "Done.", attachments=[report])
    (att,) = stored(kx, s.id)[0].attachments
    assert att["synopsis_by"].startswith("extractive digest; the compaction model failed (")
    assert "model overloaded" in att["synopsis_by"]
    assert "[document summarised:" in att["synopsis"]
    kx.close()
