"""Context packs: levels, drafts, activation, publish to the shared directory, the guard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.context import ContextBudgetExceeded
from kairox_core.errors import KairoxUserError
from kairox_core.longterm import PackNotFoundError, PackPromoted, PackPublished
from kairox_core.longterm.packfiles import PackDirectory, PackFile, parse, render


def config(tmp_path: Path, **extra: Any) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "kairox": {"system_prompt": "Be brief."},
            "retrieval": {"workspace_index": False},
            "packs": {"dir": str(tmp_path / "packs")},
        }
        | extra
    )


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "k.db", config(tmp_path)) as kx:
        yield kx


def packs_block(messages: list[dict[str, Any]]) -> str:
    found = [m["content"] for m in messages if "<kairox:packs>" in (m.get("content") or "")]
    return found[0] if found else ""


@pytest.mark.slow
def test_promote_three_chunks_activate_then_publish(kx: Kairox, tmp_path: Path) -> None:
    texts = ["Use British spelling.", "Cite the ticket id in commits.", "Dates are ISO 8601."]
    ids = [kx.longterm.add(t, scope="project", workspace_id="w1").id for t in texts]
    draft = kx.packs.promote(ids)
    assert draft.level == "personal" and draft.draft
    assert all(t in draft.text for t in texts)
    s = kx.session(workspace="w1")
    assert packs_block(s.preview_sync("hello").messages) == ""  # a draft is never injected

    kx.packs.activate(draft.name, workspace_id="w1")
    assert not kx.packs.get(draft.name).draft
    for prompt in ("hello", "what now?", "and then?"):
        turn = s.begin_turn_sync(prompt)
        block = packs_block(turn.messages)
        assert f"{draft.text}\n" in block  # verbatim
        assert turn.messages[1]["content"] == block  # right after the system prompt
        turn.complete_sync("ok")
    assert packs_block(kx.session(workspace="w2").preview_sync("hello").messages) == ""

    team = kx.packs.publish(draft.name, level="team", by="ada")
    assert (team.level, team.published_by) == ("team", "ada")
    path = tmp_path / "packs" / f"{draft.name}.md"
    meta = parse(path.read_text(), path)
    assert (meta.level, meta.published_by, meta.text) == ("team", "ada", draft.text)
    assert f"{draft.text}\n" in packs_block(s.preview_sync("hello").messages)  # still active
    trail = kx.events("_packs")
    promoted = [e for e in trail if isinstance(e, PackPromoted)]
    assert promoted and promoted[0].chunk_ids == tuple(ids)
    published = [e for e in trail if isinstance(e, PackPublished)]
    assert [(e.level, e.previous_level, e.published_by) for e in published] == [
        ("team", "personal", "ada")
    ]
    org = kx.packs.publish(draft.name, level="org", by="bo")
    assert org.level == "org"
    with pytest.raises(KairoxUserError, match="only moves up"):
        kx.packs.publish(draft.name, level="team")


def test_active_from_config_per_workspace_and_profile(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        packs={
            "dir": str(tmp_path / "packs"),
            "active": ["everywhere"],
            "workspaces": {"docs": ["docs-style"]},
            "profiles": {"default": ["house"]},
        },
    )
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        for name in ("everywhere", "docs-style", "house"):
            kx.packs.create(name, text=f"text of {name}")
        kx.packs.promote([kx.longterm.add("x", scope="global").id], pack="drafty")
        assert kx.packs.active_names("docs", "default") == ["everywhere", "docs-style", "house"]
        block = packs_block(kx.session(workspace="docs").preview_sync("hi").messages)
        assert all(f"text of {n}" in block for n in ("everywhere", "docs-style", "house"))
        other = kx.session(workspace="code").preview_sync("hi")
        assert "docs-style" not in packs_block(other.messages)
    cfg2 = config(tmp_path, packs={"dir": str(tmp_path / "packs"), "active": ["drafty", "gone"]})
    with Kairox.open(tmp_path / "k.db", cfg2) as kx:
        ctx = kx.session(workspace="docs").preview_sync("hi")
        assert packs_block(ctx.messages) == ""
        notes = " ".join(ctx.trace.layer("packs").notes)
        assert "'drafty' is a draft" in notes and "'gone' is active but does not exist" in notes


def test_a_turn_that_cannot_hold_the_active_packs_is_refused_naming_them(tmp_path: Path) -> None:
    cfg = config(tmp_path, profiles={"default": {"context_window": 300, "reserve": 50}})
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        kx.packs.create("huge", text="rule " * 400)
        kx.packs.activate("huge")
        s = kx.session(workspace="w")
        with pytest.raises(ContextBudgetExceeded) as err:
            s.begin_turn_sync("hi")
        assert "active context packs (huge)" in err.value.parts
        assert "huge" in str(err.value) and "kairox pack activate --off" in str(err.value)
        assert s.events()[-1].type == "SessionStarted"  # nothing was recorded
        kx.packs.deactivate("huge")
        s.begin_turn_sync("hi").complete_sync("ok")


def test_create_edit_delete_and_names(kx: Kairox, tmp_path: Path) -> None:
    kx.packs.create("mine", text="one")
    team = kx.packs.create("shared", level="team", text="two")
    assert team.path == str(tmp_path / "packs" / "shared.md")
    assert [p.name for p in kx.packs.list()] == ["mine", "shared"]
    with pytest.raises(KairoxUserError, match="exists"):
        kx.packs.create("shared")
    assert kx.packs.edit("shared", "three").text == "three"
    assert kx.packs.get("shared").text == "three"
    kx.packs.delete("shared")
    assert not (tmp_path / "packs" / "shared.md").exists()
    with pytest.raises(PackNotFoundError):
        kx.packs.get("shared")
    with pytest.raises(KairoxUserError, match="not valid"):
        kx.packs.create("../evil")
    with pytest.raises(KairoxUserError, match="level must be"):
        kx.packs.create("x", level="company")
    types = [e.type for e in kx.events("_packs")]
    assert types == ["PackCreated", "PackCreated", "PackEdited", "PackDeleted"]


def test_promote_into_an_existing_personal_pack_appends(kx: Kairox) -> None:
    a = kx.longterm.add("first", scope="global")
    b = kx.longterm.add("second", scope="global")
    pack = kx.packs.promote([a.id], pack="notes")
    pack = kx.packs.promote([b.id], pack="notes")
    assert pack.text == "first\nsecond" and pack.draft
    kx.packs.create("t", level="team")
    with pytest.raises(KairoxUserError, match="team pack"):
        kx.packs.promote([a.id], pack="t")


def test_a_pack_file_a_team_member_wrote_is_read(kx: Kairox, tmp_path: Path) -> None:
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "handbook.md").write_text(
        '+++\nname = "handbook"\nlevel = "org"\n+++\n# Handbook\n\nBe kind.\n'
    )
    pack = kx.packs.get("handbook")
    assert (pack.level, pack.text) == ("org", "# Handbook\n\nBe kind.")
    (tmp_path / "packs" / "broken.md").write_text("no front matter")
    with pytest.raises(KairoxUserError, match=r"broken\.md"):
        kx.packs.get("broken")


@pytest.mark.slow
@given(
    text=st.text(max_size=200),
    by=st.text(max_size=30).filter(lambda s: "\x00" not in s),
)
def test_pack_files_round_trip(text: str, by: str) -> None:
    body = text.replace("\r", "")
    pack = PackFile(name="p", level="team", text=body, published_by=by, published_at="t")
    assert parse(render(pack), Path("p.md")) == pack


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    d = PackDirectory(tmp_path / "packs")
    for i in range(5):
        d.write(PackFile(name="p", level="team", text=f"v{i}"))
    assert [p.name for p in (tmp_path / "packs").iterdir()] == ["p.md"]
    assert d.read("p") == PackFile(name="p", level="team", text="v4")
