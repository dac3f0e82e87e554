"""The Memory view's usage: what this session has spent, turns and compaction apart.

Figures come from ``kairox_core.usage`` (the same numbers as ``kairox usage``); ``~``
marks an estimate (the provider reported no usage).
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kairox_core.usage import SessionUsage


def _n(value: int, estimated: bool) -> str:
    return f"~{value:,}" if estimated else f"{value:,}"


def usage_line(s: SessionUsage) -> Text:
    """One line for the top of the Layers tab."""
    t = s.totals
    runs = f"{t.compactions} run{'s' if t.compactions != 1 else ''}"
    line = Text("spent in this session: ", style="bold")
    line.append(f"{_n(t.total_tokens, t.estimated > 0)} tokens")
    compaction = (
        f"compaction {_n(t.compaction_tokens, t.estimated_compactions > 0)} in {runs}"
        if t.compaction_tokens or not t.compactions
        else f"compaction: {runs}, no model tokens"
    )
    line.append(
        f" (turns {_n(t.turn_tokens, t.estimated_turns > 0)} in {t.turns}, {compaction}; "
        "the Usage tab has each turn and run)",
        style="dim",
    )
    return line


def render_usage(s: SessionUsage) -> Group:
    """The Usage tab: totals, then each turn and each compaction run."""
    t = s.totals
    totals = Table(title="tokens spent", title_justify="left", expand=True)
    for col in ("", "prompt", "completion", "total"):
        totals.add_column(col, justify="right" if col else "left")
    totals.add_row(
        f"{t.turns} turns",
        _n(t.prompt_tokens, t.estimated_turns > 0),
        _n(t.completion_tokens, t.estimated_turns > 0),
        _n(t.turn_tokens, t.estimated_turns > 0),
    )
    est = t.estimated_compactions > 0
    totals.add_row(
        f"{t.compactions} compactions",
        _n(t.compaction_prompt_tokens, est),
        _n(t.compaction_completion_tokens, est),
        _n(t.compaction_tokens, est),
    )
    totals.add_row("all", "", "", _n(t.total_tokens, t.estimated > 0), style="bold")
    parts: list[Table | Text] = [totals]
    if s.compactions:
        runs = Table(title="compaction runs", title_justify="left", expand=True)
        for col in ("seq", "strategy", "model", "replaced", "read", "written", "model tokens"):
            runs.add_column(col, justify="left" if col in ("strategy", "model") else "right")
        for c in s.compactions:
            runs.add_row(
                str(c.seq),
                c.strategy,
                c.model or "-",
                f"{c.first_seq}-{c.last_seq}",
                f"{c.tokens_in:,}",
                f"{c.tokens_out:,}",
                _n(c.total_tokens, c.estimated) if c.uses_model else "none (no model)",
            )
        parts.append(runs)
    if s.turns:
        turns = Table(title="turns", title_justify="left", expand=True)
        for col in ("seq", "model", "prompt", "completion", "total"):
            turns.add_column(col, justify="left" if col == "model" else "right")
        for u in s.turns[-50:]:
            turns.add_row(
                str(u.seq),
                u.model or u.provider or "-",
                _n(u.prompt_tokens, u.estimated),
                _n(u.completion_tokens, u.estimated),
                _n(u.total_tokens, u.estimated),
            )
        parts.append(turns)
        if len(s.turns) > 50:
            parts.append(Text(f"the newest 50 of {len(s.turns)} turns", style="dim"))
    if t.estimated:
        parts.append(
            Text(
                "~ estimated: the provider reported no usage, so Kairox's own count stands "
                "in (`kairox usage SESSION` prints the same figures)",
                style="dim",
            )
        )
    return Group(*parts)
