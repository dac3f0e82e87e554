"""What went into a turn's context, what was left out and why, with token counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LAYERS = (
    "system",
    "packs",
    "memories",
    "pinned",
    "summaries",
    "longterm",
    "retrieval",
    "history",
    "prompt",
)


@dataclass(frozen=True)
class TraceItem:
    """One item of a layer. ``tokens`` is its share of the layer's message(s)."""

    id: str
    label: str
    tokens: int
    source: str | None = None
    reason: str | None = None  # why it was dropped; None when included

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "label": self.label, "tokens": self.tokens}
        if self.source is not None:
            d["source"] = self.source
        if self.reason is not None:
            d["reason"] = self.reason
        return d


@dataclass
class LayerTrace:
    """One layer: its message tokens (framing included), its limit, items in and out."""

    name: str
    tokens: int = 0
    limit: int | None = None
    messages: int = 0
    included: list[TraceItem] = field(default_factory=list)
    dropped: list[TraceItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "limit": self.limit,
            "messages": self.messages,
            "included": [i.as_dict() for i in self.included],
            "dropped": [i.as_dict() for i in self.dropped],
            "notes": list(self.notes),
        }


@dataclass
class ContextTrace:
    """Per layer and per source: tokens, items included and dropped; totals and budget."""

    profile: str | None
    encoding: str
    margin: float
    context_window: int
    reserve: int
    budget: int
    priming: int
    total: int = 0
    layers: dict[str, LayerTrace] = field(
        default_factory=lambda: {name: LayerTrace(name) for name in LAYERS}
    )

    def layer(self, name: str) -> LayerTrace:
        return self.layers[name]

    @property
    def dropped(self) -> list[TraceItem]:
        return [item for layer in self.layers.values() for item in layer.dropped]

    def tokens_by_source(self) -> dict[str, int]:
        """Tokens per source: layers, with retrieval split by index/knowledge base."""
        out: dict[str, int] = {}
        for name, layer in self.layers.items():
            if name == "retrieval" and layer.included:
                for item in layer.included:
                    key = f"retrieval:{item.source}"
                    out[key] = out.get(key, 0) + item.tokens
            elif layer.tokens:
                out[name] = layer.tokens
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "encoding": self.encoding,
            "margin": self.margin,
            "context_window": self.context_window,
            "reserve": self.reserve,
            "budget": self.budget,
            "reply_priming": self.priming,
            "total": self.total,
            "free": self.budget - self.total,
            "by_source": self.tokens_by_source(),
            "layers": {name: layer.as_dict() for name, layer in self.layers.items()},
        }
