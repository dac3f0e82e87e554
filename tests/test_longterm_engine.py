"""LongTermEngine in the engine seam's shape: packs as mandatory contributions, the
long-term block as a system contribution fitted within the share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kairox_core import Kairox
from kairox_core.config import KairoxConfig


@dataclass(frozen=True)
class Request:  # the fields of kairox_core.engines.AssemblyRequest the engine reads
    prompt: str
    profile: str
    before_seq: int | None = None


async def test_contributions_for_packs_and_chunks(tmp_path: Path) -> None:
    cfg = KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False},
            "packs": {"dir": str(tmp_path / "packs")},
            "longterm": {"share": 0.02, "threshold": 0.15},
            "profiles": {"default": {"context_window": 4000, "reserve": 0}},
        }
    )
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        s = kx.session(workspace="w")
        kx.packs.create("rules", text="Answer briefly.")
        kx.packs.activate("rules")
        near = kx.longterm.add("The staging password rotates on Mondays.", scope="global")
        long = kx.longterm.add("The staging password policy: " + "detail " * 80, scope="global")
        kx.longterm.add("Ada likes green tea.", scope="global")
        out = await kx.longterm_engine.before_assembly(
            s, Request("When does the staging password rotate?", "default")
        )
        mandatory = [c for c in out if c.layer == "mandatory"]
        assert [(c.label, c.text) for c in mandatory] == [("pack:rules", "Answer briefly.")]
        (system,) = [c for c in out if c.layer == "system"]
        assert "<kairox:longterm>" in system.text and near.text in system.text
        assert long.id not in system.text  # 80 tokens of share: the long one does not fit
        counter = s.assembler().counter
        assert counter.block_message("system", counter.raw_count(system.text)) <= 80
        notes = " ".join(system.notes)
        assert f"{near.id} (global, similarity" in notes and "over the long-term share" in notes
        assert "below the threshold" in notes  # the tea chunk

        unrelated = await kx.longterm_engine.before_assembly(s, Request("", "default"))
        assert [c.layer for c in unrelated] == ["mandatory"]
