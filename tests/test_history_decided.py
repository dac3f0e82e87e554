"""``[memory] history_decided``: the model reads each of its past memory tags as what
became of it (issue 28, item 1): the approved scope, key and body; a note for a
rejected one; pending as written, settled once a person decides, even in another
process. People still see the clean text, and the tags are never routed again."""

from __future__ import annotations

from pathlib import Path

from kairox_core.chat.engine import ChatEngine
from kairox_core.config import parse_config
from kairox_core.context.rendering import assistant_message
from kairox_core.events import MemoryProposed
from kairox_core.memory.decided import REJECTED_NOTE
from kairox_core.providers.scripted import ScriptedProvider

CITY = '<memory scope="workspace" key="location">Lives in Porto</memory>'
DOG = '<memory scope="user" key="dog">Dog is called Biscuit</memory>'
NOTE = '<memory scope="session">Talking about pets</memory>'


def engine_for(
    tmp_path: Path,
    replies: list[str],
    *,
    decided: bool = True,
    rejected: str = "note",
    **kw: str,
) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 256}},
            "memory": {
                "history_tags": True,
                "history_decided": decided,
                "history_rejected": rejected,
            },
        }
    )
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(replies), **kw)


async def model_sees(engine: ChatEngine) -> list[str]:
    """The assistant messages the next turn sends, checked against the budget."""
    context = await engine.session.preview("next")
    counter = engine.session.assembler().counter
    assert counter.count_messages(context.messages) <= context.trace.total
    return [m["content"] for m in context.messages if m["role"] == "assistant"]


def proposed(engine: ChatEngine) -> list[MemoryProposed]:
    return [e for e in engine.history() if isinstance(e, MemoryProposed)]


async def test_tags_read_back_as_decided(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"Noted. {CITY}", f"Noted. {DOG} {NOTE}", "Sure."])
    first = await engine.run_turn("Remember that I live in Porto.", lambda _: None)
    assert first.text == "Noted."
    # pending: as written
    assert await model_sees(engine) == [f"Noted. {CITY}"]
    # the person fixes the scope and the key on the card: the model reads the fix
    (card,) = first.proposals
    engine.approve(card.proposal_id, scope="user", key="home-city")
    fixed = '<memory scope="user" key="home-city">Lives in Porto</memory>'
    assert await model_sees(engine) == [f"Noted. {fixed}"]
    # a rejected tag is a note, never a tag to copy; a session one reads as written
    second = await engine.run_turn("My dog is Biscuit; we talk pets.", lambda _: None)
    (dog,) = second.proposals
    engine.reject(dog.proposal_id, reason="no")
    assert await model_sees(engine) == [f"Noted. {fixed}", f"Noted. {REJECTED_NOTE} {NOTE}"]
    # what people see and what history stores are unchanged
    assert second.text == "Noted."
    await engine.run_turn("ok", lambda _: None)
    assert len(proposed(engine)) == 3  # never routed again
    await engine.close()


async def test_an_unchanged_approval_reads_as_written(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"Noted. {DOG}"])
    outcome = await engine.run_turn("My dog is Biscuit.", lambda _: None)
    engine.approve(outcome.proposals[0].proposal_id)
    assert await model_sees(engine) == [f"Noted. {DOG}"]
    await engine.close()


async def test_a_decision_made_elsewhere_reaches_a_cached_history(
    tmp_path: Path, kairox_home: Path
) -> None:
    """The session caches its history between turns; a card decided by another
    engine on the same database (another window, the CLI) still changes what the
    model reads next, and the history's counts follow the new text."""
    engine = engine_for(tmp_path, [f"Noted. {CITY}", "Sure."])
    outcome = await engine.run_turn("Remember that I live in Porto.", lambda _: None)
    assert await model_sees(engine) == [f"Noted. {CITY}"]  # cached, pending
    other = engine_for(tmp_path, ["x"], session_id=engine.session_id)
    other.reject(outcome.proposals[0].proposal_id)
    await other.close()
    assert await model_sees(engine) == [f"Noted. {REJECTED_NOTE}"]
    history = engine.session._history
    assert not history.unsettled
    counter = engine.session.assembler().counter
    (reply,) = [u for u in history.units if u.kind == "assistant"]
    assert reply.tokens == counter.message(assistant_message(f"Noted. {REJECTED_NOTE}"))
    await engine.close()


async def test_a_resumed_session_reads_the_decisions(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"Noted. {CITY}"])
    outcome = await engine.run_turn("Remember that I live in Porto.", lambda _: None)
    engine.reject(outcome.proposals[0].proposal_id)
    sid = engine.session_id
    await engine.close()
    resumed = engine_for(tmp_path, ["x"], session_id=sid)
    assert await model_sees(resumed) == [f"Noted. {REJECTED_NOTE}"]
    await resumed.close()


async def test_off_reads_the_tags_as_written(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"Noted. {CITY}"], decided=False)
    outcome = await engine.run_turn("Remember that I live in Porto.", lambda _: None)
    engine.reject(outcome.proposals[0].proposal_id)
    assert await model_sees(engine) == [f"Noted. {CITY}"]
    await engine.close()


async def test_a_hidden_rejection_leaves_the_visible_text(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [f"Noted. {CITY} {NOTE}", CITY], rejected="hidden")
    for prompt in ("Remember that I live in Porto.", "Again: I live in Porto."):
        outcome = await engine.run_turn(prompt, lambda _: None)
        engine.reject(next(p for p in outcome.proposals if p.scope == "workspace").proposal_id)
    assert await model_sees(engine) == [f"Noted. {NOTE}", ""]
    await engine.close()
