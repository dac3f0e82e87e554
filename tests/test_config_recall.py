"""``[recall]`` and the ``[compaction] recall*`` keys it replaced: both load, the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.cli import main
from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    RecallSection,
    load_config_file,
    parse_config,
)
from kairox_core.errors import ConfigError

OLD = """
[compaction]
target_tokens = 300
recall = false
recall_k = 12
recall_content_prior = 1.0
recall_content_words = 15
recall_neighbour_weight = 0.2
recall_speaker_prior = 1.5
"""
NEW = """
[compaction]
target_tokens = 300

[recall]
enabled = false
k = 12
content_prior = 1.0
content_words = 15
neighbour_weight = 0.2
speaker_prior = 1.5
"""


def load(tmp_path: Path, name: str, text: str) -> KairoxConfig:
    path = tmp_path / name
    path.write_text(text)
    return load_config_file(path)


def test_old_keys_load_with_a_note_and_equal_the_new_table(tmp_path: Path) -> None:
    with pytest.warns(FutureWarning) as warned:
        old = load(tmp_path, "old.toml", OLD)
    assert [str(w.message) for w in warned] == list(old.notes)
    new = load(tmp_path, "new.toml", NEW)
    assert new.notes == ()
    assert (
        old.recall
        == new.recall
        == RecallSection(
            enabled=False,
            k=12,
            content_prior=1.0,
            content_words=15,
            neighbour_weight=0.2,
            speaker_prior=1.5,
        )
    )
    assert old.compaction == new.compaction and old.compaction.recall_k is None
    assert old.model_dump() == new.model_dump() and old.redacted() == new.redacted()
    assert len(old.notes) == 6
    assert "[compaction] recall is deprecated: write it as [recall] enabled" in old.notes


def test_the_recall_table_wins_over_an_old_key(tmp_path: Path) -> None:
    with pytest.warns(FutureWarning):
        both = load(tmp_path, "both.toml", "[compaction]\nrecall_k = 5\n\n[recall]\nk = 9\n")
    assert both.recall.k == 9
    assert both.notes == (
        "[compaction] recall_k is deprecated: write it as [recall] k (ignored: [recall] sets it)",
    )


def test_an_old_key_out_of_bounds_is_named_as_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"compaction\.recall_k"):
        load(tmp_path, "bad.toml", "[compaction]\nrecall_k = 0\n")
    with pytest.raises(ConfigError, match=r"recall\.k"):
        load(tmp_path, "bad2.toml", "[recall]\nk = 0\n")


def test_a_section_built_in_python_with_old_keys_moves_them_too() -> None:
    with pytest.warns(FutureWarning):
        config = KairoxConfig(compaction=CompactionSection(recall=False, recall_k=3))
    assert config.recall == RecallSection(enabled=False, k=3)
    assert config.compaction == CompactionSection()


@given(
    enabled=st.booleans(),
    k=st.integers(1, 10_000),
    prior=st.floats(0, 10, allow_nan=False),
    words=st.integers(1, 100),
)
def test_old_and_new_spellings_agree(enabled: bool, k: int, prior: float, words: int) -> None:
    new = {"enabled": enabled, "k": k, "speaker_prior": prior, "content_words": words}
    old = {
        "recall": enabled,
        "recall_k": k,
        "recall_speaker_prior": prior,
        "recall_content_words": words,
    }
    with pytest.warns(FutureWarning):
        from_old = parse_config({"compaction": old})
    assert from_old.recall == parse_config({"recall": new}).recall


def test_every_command_prints_the_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    path = tmp_path / "kairox.toml"
    path.write_text("[compaction]\nrecall_k = 12\n")
    with pytest.raises(SystemExit) as info:
        main(["--config", str(path), "config", "check"])
    out = capsys.readouterr()
    assert info.value.code in (0, None)
    assert f"note: {path}: [compaction] recall_k is deprecated: write it as [recall] k" in out.err
    assert "FutureWarning" not in out.err and out.out.startswith("ok:")
