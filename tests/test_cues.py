"""The cue gate of ``[memory] request_check_untagged = "cued"``: which messages hold a
request's words (kairox_core.memory.cues), and the setting's old bool values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.config import parse_config
from kairox_core.errors import ConfigError
from kairox_core.memory.cues import may_ask_to_remember, says_remember

CUED = [
    "Don't forget that the team uses Python 3.12.",  # the new-user trial's miss
    "Remember that my manager is Priya.",
    "Please note that my favourite colour is teal.",
    "Note: the database is called orders_prod.",
    "note that I am vegetarian",
    "Keep in mind that I live in Utrecht.",
    "Bear it in mind: the dev server runs on port 8050.",
    "Do not forget my sister's birthday is in May.",
    "Save this: the sprint ends every other Thursday.",
    "Jot down that the API key rotates monthly.",
    "Make a note of my shoe size, 44.",
    "From now on, answer in French.",
    "For future reference, I use vim.",
    "Memorise my locker number: 12.",
    "For the record, our sprint review is every other Wednesday.",
    "My daughter's name is Lena, file that away for later.",
    "Do you remember my dog's name?",  # asked, and the model's verdict says "other"
]
PLAIN = [
    "What is 2 + 2?",
    "Write a note to my landlord about the heating.",
    "What is a memo?",
    "Hi! I'm Dana, a data engineer.",
    "Translate 'good morning' into Spanish.",
    "Notes on C major, please.",
    "A note: this is not a request at the start.",
    "How do I store a list in a dict?",
    "What are the noteworthy features of Rust?",
]


@pytest.mark.parametrize("message", CUED)
def test_requests_are_cued(message: str) -> None:
    assert may_ask_to_remember(message)


@pytest.mark.parametrize("message", PLAIN)
def test_other_messages_are_not(message: str) -> None:
    assert not may_ask_to_remember(message)


@given(st.text(max_size=200), st.text(max_size=200))
def test_a_cue_anywhere_between_words_is_found(before: str, after: str) -> None:
    assert may_ask_to_remember(f"{before} don't forget {after}")
    assert may_ask_to_remember(f"{before}\nremember {after}")


@given(st.text(alphabet=st.characters(blacklist_categories=("L", "N")), max_size=300))
def test_text_without_words_is_never_cued_and_never_raises(text: str) -> None:
    assert not may_ask_to_remember(text)


@pytest.mark.parametrize(
    ("value", "mode"), [(True, "always"), (False, "off"), ("cued", "cued"), ("off", "off")]
)
def test_the_setting_loads_old_bools_and_modes(value: object, mode: str) -> None:
    config = parse_config({"memory": {"request_check_untagged": value}})
    assert config.memory.request_check_untagged == mode


def test_an_unknown_mode_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="request_check_untagged"):
        parse_config({"memory": {"request_check_untagged": "sometimes"}})


def test_a_request_in_words_is_not_a_question() -> None:
    assert says_remember("Save this: the production database is named orders_prod.")
    assert not says_remember("Do you remember my dog's name?")
    assert not says_remember("Can you remember that I like tea?  ")
    assert not says_remember("What is the capital of Australia")
