"""A ``ReActAgent``'s reasoning trace, split into tool rounds and the answer.

``ReActAgent`` hands its memory one assistant message at the end of a run: every step's
text joined by newlines (``Thought: ...`` / ``Action: ...`` / ``Action Input: ...``,
``Observation: ...`` with the tool's output, ..., ``Thought: ...`` / ``Answer: ...``).
Stored whole, the observations (tool output: untrusted) would sit in the reply, and a
``<memory>`` tag a tool returned would become a proposal. So the trace is cut at its
*last* ``Thought:``/``Answer:`` pair, which only the model can have written (a tool's
output comes before it): what follows is the reply; each action before it is recorded
with its observation as a tool result, and anything that does not parse as actions
becomes one untrusted ``react`` result, never part of the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSWER = re.compile(r"(?:^|\n)Thought:[^\n]*\nAnswer(?: \(Starts With\))?:[ \t]?", re.DOTALL)
_ACTION = re.compile(
    r"Thought:[^\n]*\nAction:[ \t]?(?P<action>[^\n]*)\nAction Input:[ \t]?(?P<input>.*?)"
    r"\nObservation:[ \t]?(?P<observation>.*?)(?=\nThought:|\Z)",
    re.DOTALL,
)


@dataclass(frozen=True)
class ReactStep:
    action: str
    action_input: str
    observation: str


@dataclass(frozen=True)
class ReactTrace:
    steps: list[ReactStep]
    reply: str


def split_react_trace(text: str) -> ReactTrace | None:
    """The trace's tool rounds and reply; None when ``text`` is not a ReAct trace."""
    if not text.startswith("Thought:"):
        return None
    answers = list(_ANSWER.finditer(text))
    if not answers:
        return None
    last = answers[-1]
    head, reply = text[: last.start()], text[last.end() :].strip()
    steps: list[ReactStep] = []
    pos = 0
    for match in _ACTION.finditer(head):
        if head[pos : match.start()].strip():
            break
        steps.append(
            ReactStep(
                match["action"].strip(),
                match["input"].strip(),
                match["observation"].strip(),
            )
        )
        pos = match.end()
    rest = head[pos:].strip()
    if rest:  # not actions and observations as ReAct writes them: keep it out of the reply
        steps.append(ReactStep("react", "{}", rest))
    return ReactTrace(steps, reply)
