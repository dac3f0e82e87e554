"""Attachments as context shrinks: images dropped to a marker, long documents digested."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core import hookimpl
from kairox_core.compaction.attachments import digest, render_for_summary
from kairox_core.compaction.base import CompactionOutput, CompactionRequest
from kairox_core.config import CompactionSection, KairoxConfig, ProfileConfig
from kairox_core.facade import Kairox
from kairox_core.tokens import TokenCounter

SEEN: list[CompactionRequest] = []


class Capture:
    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        SEEN.append(request)
        return CompactionOutput("captured")


class CapturePlugin:
    @hookimpl
    def kairox_register_compaction_strategies(self, register: Callable[..., None]) -> None:
        register("capture", lambda **kw: Capture())


def open_kx(tmp_path: Path) -> Kairox:
    return Kairox.open(
        tmp_path / "kx.db",
        KairoxConfig(
            profiles={"default": ProfileConfig(model="gpt-4o", context_window=8000, reserve=500)},
            compaction=CompactionSection(
                strategy="capture", keep_recent_exchanges=1, attachment_max_tokens=60
            ),
        ),
    )


def test_older_turns_show_images_as_dropped_markers(kairox_home: Path, tmp_path: Path) -> None:
    kx = open_kx(tmp_path)
    s = kx.session(workspace="w")
    s.run_turn_sync(
        "what is in this picture?",
        "a cat",
        attachments=[
            {"kind": "image", "filename": "cat.png"},
            {"kind": "document", "filename": "notes.txt", "text": "short note"},
        ],
    )
    turn = s.begin_turn_sync("and this one?", [{"kind": "image", "filename": "dog.png"}])
    older = turn.messages[-3]["content"]  # older user message, its reply, the new prompt
    assert "[Image dropped — was: cat.png]" in older
    assert "[attachment image cat.png]" not in older
    assert "[attachment document notes.txt]\nshort note" in older  # documents stay
    assert "[attachment image dog.png]" in turn.messages[-1]["content"]  # the new prompt
    counter = TokenCounter.for_model("gpt-4o")
    assert counter.count_messages(turn.messages) <= turn.trace.total  # stored counts exact
    turn.complete_sync("a dog")
    kx.close()


def test_compaction_digests_long_documents_and_drops_images(
    kairox_home: Path,
    tmp_path: Path,
    register_plugin: Callable[[object, str], Any],
) -> None:
    register_plugin(CapturePlugin(), "capture")
    SEEN.clear()
    kx = open_kx(tmp_path)
    s = kx.session(workspace="w")
    report = " ".join(
        f"Section {i} says the filler goes on and on without much point." for i in range(120)
    )
    report = "Quarterly report for ACME. " + report + " Revenue was 4.2 million on 30 June."
    s.run_turn_sync(
        "summarise the report",
        "done",
        attachments=[
            {"kind": "document", "filename": "q2.txt", "text": report},
            {"kind": "image", "filename": "chart.png"},
        ],
    )
    s.run_turn_sync("thanks", "welcome")
    assert s.compact_sync().ok
    user = SEEN[0].events[0]
    assert "[Image dropped — was: chart.png]" in user.text
    assert "Quarterly report for ACME." in user.text and "document summarised" in user.text
    assert TokenCounter().count(user.text) < 120  # not the 1,500-token original
    stored = kx.events(s.id)
    assert any(
        getattr(e, "attachments", ()) and e.attachments[0]["text"] == report for e in stored
    )  # the original stays whole in the store
    kx.close()


def test_render_for_summary_keeps_short_documents_whole() -> None:
    text = render_for_summary(
        "see attached", [{"kind": "document", "filename": "a.md", "text": "Ship on 4 May."}], 50
    )
    assert text == "see attached\n\n[document a.md]\nShip on 4 May."


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=40),
    st.integers(min_value=8, max_value=200),
)
def test_digest_never_exceeds_its_limit_by_more_than_its_note(parts: list[str], limit: int) -> None:
    counter = TokenCounter()
    text = ". ".join(parts)
    out = digest(text, limit, counter)
    if counter.count(text.strip()) <= limit:
        assert out == text.strip()
    else:
        body = out.rsplit(" [document summarised:", 1)[0]
        assert counter.count(body) <= limit + 2


def test_the_image_marker_survives_every_strategy(
    kairox_home: Path, tmp_path: Path, register_plugin: Callable[[object, str], Any]
) -> None:
    register_plugin(CapturePlugin(), "capture")  # a summary that keeps nothing of it
    marker = "[Image dropped — was: login.png]"
    for strategy in ("extractive", "capture"):
        kx = Kairox.open(
            tmp_path / f"{strategy}.db",
            KairoxConfig(
                profiles={"default": ProfileConfig(model="gpt-4o", context_window=8000)},
                compaction=CompactionSection(strategy=strategy, keep_recent_exchanges=1),
            ),
        )
        s = kx.session(workspace="w")
        s.run_turn_sync(
            "why does this fail?",
            "The form posts twice.",
            attachments=[{"kind": "image", "filename": "login.png"}],
        )
        s.run_turn_sync("and now?", "Fixed.")
        assert kx.compact(s.id).status == "completed"
        sent = "\n".join(str(m["content"]) for m in s.preview_sync("x").messages)
        assert marker in sent, strategy
        s.run_turn_sync("more", "ok")
        s.run_turn_sync("again", "ok")
        assert kx.compact(s.id).status == "completed"  # a later range: no second marker
        texts = [summary.text for summary in s.refresh_compaction().summaries]
        assert "\n".join(texts).count(marker) == 1, (strategy, texts)
        kx.close()
