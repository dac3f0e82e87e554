"""The budget guard's error: the mandatory parts of a turn do not fit the window."""

from __future__ import annotations

from collections.abc import Mapping

from kairox_core.errors import KairoxUserError


class ContextBudgetExceeded(KairoxUserError):
    """The mandatory parts (system prompt, active packs, new prompt, pinned facts, reply
    priming) exceed the budget; nothing is sent.

    ``parts`` maps each mandatory part to its size in tokens, framing included, so the
    message says which part to shorten.
    """

    def __init__(
        self,
        parts: Mapping[str, int],
        *,
        budget: int,
        context_window: int,
        reserve: int,
        profile: str | None = None,
    ) -> None:
        self.parts = dict(parts)
        self.budget = budget
        self.context_window = context_window
        self.reserve = reserve
        self.profile = profile
        self.total = sum(self.parts.values())
        sizes = " + ".join(f"{name} {n}" for name, n in self.parts.items())
        where = f"profile '{profile}'" if profile else "this profile"
        unpin = (
            ", unpin facts (`kairox unpin SESSION FACT_ID`)" if "pinned facts" in self.parts else ""
        )
        packs = next((p for p in self.parts if p.startswith("active context packs")), None)
        if packs:
            unpin += ", deactivate a context pack (`kairox pack activate --off NAME`)"
        super().__init__(
            f"the turn does not fit the context budget of {where}: {sizes} = {self.total} "
            f"tokens, but the budget is {budget} (context_window {context_window} - reserve "
            f"{reserve}); nothing was sent.\n  fix: shorten the prompt or the system prompt/"
            f"instructions{unpin}, or use a profile with a larger context_window or smaller "
            f"reserve"
        )
