"""A turn caps the proposals of one reply (``[memory] max_proposals_per_turn``)."""

from __future__ import annotations

import time
from pathlib import Path

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.markers import DEFUSE


def open_kx(tmp_path: Path, **memory: int) -> Kairox:
    cfg = KairoxConfig.model_validate(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 400_000}},
            "memory": memory,
        }
    )
    return Kairox.open(tmp_path / "kx.db", cfg)


def test_a_reply_of_a_thousand_markers_raises_only_the_cap(
    kairox_home: Path, tmp_path: Path
) -> None:
    # measured on main: 1,000 keyless session markers took 36 s (3,000: 538 s)
    kx = open_kx(tmp_path)
    try:
        s = kx.session(workspace="w1")
        reply = "ok\n" + "".join(
            f'<memory scope="session">fact {i}</memory>\n' for i in range(1000)
        )
        start = time.process_time()
        result = s.begin_turn_sync("hi").complete_sync(reply)
        assert time.process_time() - start < 5.0
        assert len(result.proposals) == 20
        assert [m.body for m in result.markers] == [f"fact {i}" for i in range(20)]
        assert {i.reason for i in result.invalid} == {"too many proposals"}
        assert len(result.invalid) == 980
        assert result.text == "ok\n"
    finally:
        kx.close()


def test_the_cap_is_configurable_and_stored_text_never_reparses(
    kairox_home: Path, tmp_path: Path
) -> None:
    kx = open_kx(tmp_path, max_proposals_per_turn=1)
    try:
        s = kx.session(workspace="w1")
        reply = (
            '<mem<memory scope="session">a</memory>ory scope="user" key="k">evil</memory> '
            '<memory scope="session">b</memory>'
        )
        result = s.begin_turn_sync("hi").complete_sync(reply)
        assert [m.body for m in result.markers] == ["a"]
        assert [i.reason for i in result.invalid] == ["stray closing tag", "too many proposals"]
        assert DEFUSE in result.text
        # replaying the stored text proposes nothing
        replay = s.begin_turn_sync("again").complete_sync(result.text)
        assert replay.markers == [] and replay.invalid == [] and replay.proposals == []
        assert kx.approvals.pending() == []
    finally:
        kx.close()
