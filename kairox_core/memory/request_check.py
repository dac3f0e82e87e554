"""The request check: a history-free look at whether the person asked to remember anything.

With ``[memory] history_tags`` the model reads its own past memory tags, which keeps a
small model using the protocol deep into a conversation, but the same history also
teaches it "question -> Noted. and a tag": in the new-user trial's conversation the
default 0.5B model answered "What is the capital of Australia?" and most later
questions with "Noted." and a tag holding its own answer (issue 28, docs/results.md). On the
message alone it tells a request to remember from a question well. So when a reply
carries memory tags, the model is asked one short question about the person's message
alone, at temperature 0, with a few tokens: "remember" keeps the tags; "other" drops
them (never proposed) and the engine answers the turn once more with
the memory tags left out of its history. An answer that is neither,
an error or a timeout keeps the tags, and the verdict says so (``note``): a false tag
then still waits for a person on its card, while a dropped right tag would be lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kairox_core.providers.base import Message, ModelProvider

REQUEST_CHECK_MAX_TOKENS = 3  # one word
# Asked as "remember or other", the message quoted in a question: asked "yes or no",
# with the message alone as the user turn, the 0.5B model answered "no" to most
# personal requests (docs/results.md, 2 December).
_SYSTEM = "Answer with one word: remember or other."
_ASK = (
    "Is this message a request to remember something, or something other (a question, "
    'a task)?\nMessage: "{message}"'
)
# worked examples, none from the benchmark's conversations or single prompts: a request
# and something else alternating, a question about an earlier fact among the others
_EXAMPLES = (
    ("Remember that my cat is called Tom.", "remember"),
    ("How many legs does a spider have?", "other"),
    ("Please note that our CI runs on Jenkins.", "remember"),
    ("What is my cat called?", "other"),
    ("Keep in mind that I work night shifts.", "remember"),
    ("Convert 5 kilometres to miles.", "other"),
    ("Don't forget that my brother lives in Oslo.", "remember"),
    ("Write a limerick about a frog.", "other"),
    ("Note that I am vegetarian.", "remember"),
    ("Summarise what a hash map is.", "other"),
)
# "question" and "task" are the question's own examples of "other"
_ANSWERS = {"remember": True, "other": False, "question": False, "task": False}


@dataclass(frozen=True)
class RequestVerdict:
    """What the check found: ``asked`` False means the message asked for no memory
    (the reply's tags are dropped); None means the check could not tell (kept)."""

    asked: bool | None
    answer: str | None  # the raw answer; None when the call failed
    note: str  # one line for the event, the trace and the front ends

    @property
    def drops(self) -> bool:
        return self.asked is False


RequestCheck = Callable[[str], Awaitable[RequestVerdict]]

CUED = "request check answered other, but the message asks to remember in so many words; tags kept"
DROPPED = (
    "request check: the message asked to remember nothing, so the reply's memory tags "
    "were dropped ({n}) and the turn was answered again without memory tags in its history"
)


def parse_answer(answer: str) -> bool | None:
    """True for "remember", False for "other" (or "question", "task": the question's
    examples of it), case, quotes and a final full stop aside; else None."""
    word = answer.strip().strip("`'\"*").rstrip(".!").strip().lower()
    return _ANSWERS.get(word)


def decide(answer: str | None, error: str | None = None) -> RequestVerdict:
    """The verdict for the check's ``answer`` (or the ``error`` that stopped it)."""
    if error is not None or answer is None:
        return RequestVerdict(
            None, None, f"request check failed ({error or 'no answer'}); tags kept"
        )
    asked = parse_answer(answer)
    if asked is None:
        return RequestVerdict(
            None, answer, f"request check answer {answer.strip()[:40]!r} unreadable; tags kept"
        )
    if asked:
        return RequestVerdict(True, answer, "request check: a request to remember")
    return RequestVerdict(False, answer, "request check: not a request to remember")


def question(message: str) -> list[Message]:
    """The check's whole input: the person's message alone, after the worked examples;
    no history, not the chat's system prompt."""
    messages: list[Message] = [{"role": "system", "content": _SYSTEM}]
    for said, answer in _EXAMPLES:
        messages += [
            {"role": "user", "content": _ASK.format(message=said)},
            {"role": "assistant", "content": answer},
        ]
    messages.append({"role": "user", "content": _ASK.format(message=message.strip())})
    return messages


def provider_request_check(provider: ModelProvider, *, timeout: float) -> RequestCheck:
    """A ``RequestCheck`` asking ``provider``; an error or a timeout becomes a verdict
    that keeps the tags and says why (never raised, never silent)."""

    async def check(message: str) -> RequestVerdict:
        try:
            result = await asyncio.wait_for(
                provider.complete(
                    question(message), max_tokens=REQUEST_CHECK_MAX_TOKENS, temperature=0.0
                ),
                timeout,
            )
        except TimeoutError:
            return decide(None, f"no answer within {timeout:g} s")
        except Exception as exc:  # a provider error of any kind keeps the tags, said
            return decide(None, f"{type(exc).__name__}: {exc}"[:200])
        return decide(result.text)

    return check
