"""The assembled messages, split back into the layers of the trace: what each layer
puts in front of the model, as text.

The assembler sends one message per block layer and records each layer's message
count in the trace; it emits them in a fixed order (system; packs; engines' own
blocks; memories, pinned facts, summaries, long-term, retrieval; history; the prompt
and this turn's tool results). Walking that order with the counts gives each layer its
messages without the assembler keeping a second copy of every text. If the counts do
not add up (an assembler that changed its order), everything lands in one ``messages``
layer rather than being shown under the wrong name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kairox_core.context.trace import LAYERS, ContextTrace, LayerTrace

_BLOCKS_AFTER_ENGINES = ("memories", "pinned", "summaries", "longterm", "retrieval")


@dataclass(frozen=True)
class LayerText:
    """One layer as the model sees it: its trace and the messages it contributed."""

    name: str
    trace: LayerTrace
    messages: tuple[dict[str, Any], ...]

    @property
    def text(self) -> str:
        """The layer's message contents; history and tool turns carry their role."""
        if self.name in ("history", "prompt"):
            return "\n\n".join(f"{m.get('role', '?')}: {content(m)}" for m in self.messages)
        return "\n\n".join(content(m) for m in self.messages)


def content(message: dict[str, Any]) -> str:
    """A message's text: a string, parts (text kept, images named), or tool calls."""
    value = message.get("content")
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
        value = "\n".join(parts)
    text = "" if value is None else str(value)
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        text += f"\n[tool call {fn.get('name', '?')}({fn.get('arguments', '')})]"
    return text.strip()


def order(trace: ContextTrace) -> list[str]:
    """Layer names in the order their messages are sent."""
    engines = [name for name in trace.layers if name not in LAYERS]
    return ["system", "packs", *engines, *_BLOCKS_AFTER_ENGINES, "history", "prompt"]


def layer_texts(messages: list[dict[str, Any]], trace: ContextTrace) -> list[LayerText]:
    """Each layer of ``trace`` with the slice of ``messages`` it put there, in send order
    (layers that sent nothing included, with no messages)."""
    names = [n for n in order(trace) if n in trace.layers]
    if sum(trace.layers[n].messages for n in names) != len(messages):
        whole = LayerTrace("messages", tokens=trace.total, messages=len(messages))
        return [LayerText("messages", whole, tuple(messages))]
    out: list[LayerText] = []
    at = 0
    for name in names:
        layer = trace.layers[name]
        out.append(LayerText(name, layer, tuple(messages[at : at + layer.messages])))
        at += layer.messages
    return out
