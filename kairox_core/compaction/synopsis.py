"""A long document's synopsis, written when a turn attaches it.

The turn that attaches a PDF (or a long text file) sends it whole; every later turn
and every summary carries one paragraph instead (``history_user_message``,
``render_for_summary``). A document is long when its text passes ``[compaction]
attachment_max_tokens``. With a model-based compaction strategy (one whose object has
a ``provider()``, as ``model`` does) the compaction provider writes the paragraph;
otherwise, or when the model fails or answers nothing, it is the extractive digest
(attachments.digest), and ``synopsis_by`` says which, and why. Secrets are redacted
from a model's paragraph as from a summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kairox_core.compaction.attachments import attachment_name, digest
from kairox_core.config import KairoxConfig
from kairox_core.tokens import TokenCounter

if TYPE_CHECKING:
    from kairox_core.engines import EngineSession as Session
    from kairox_core.providers.base import ModelProvider

SYSTEM_PROMPT = (
    "You write the synopsis of a document a user attached to a conversation, so an AI "
    "assistant can recall it later without the document. Write one paragraph of plain "
    "sentences: what the document is, then its key facts (names, numbers, dates, "
    "decisions, open questions) in the order they appear. Do not invent anything that "
    "is not in the text. Leave out secrets of every kind (keys, passwords, tokens). No "
    "preamble, no headings, no lists."
)
# room in the model's input for the instructions and the answer, besides the document
_OVERHEAD = 256


def is_long(attachment: Mapping[str, Any], config: KairoxConfig, counter: TokenCounter) -> bool:
    text = attachment.get("text")
    limit = config.compaction.attachment_max_tokens
    return isinstance(text, str) and counter.count(text) > limit


async def write_synopsis(
    config: KairoxConfig, session: Session | None, attachment: Mapping[str, Any]
) -> dict[str, str] | None:
    """``{"synopsis", "synopsis_by"}`` for a long document, None for a short one."""
    counter = TokenCounter()
    if not is_long(attachment, config, counter):
        return None
    text = str(attachment["text"])
    limit = config.compaction.attachment_max_tokens
    note = ""
    try:
        provider = _compaction_provider(config, session)
    except Exception as exc:  # a strategy or provider that cannot be built: said so
        provider, note = None, f"; no compaction model ({type(exc).__name__}: {exc})"
    if provider is not None:
        try:
            paragraph = await _ask(provider, attachment, text, config, counter)
        except Exception as exc:  # any provider failure: the digest stands in, said so
            note = f"; the compaction model failed ({type(exc).__name__}: {exc})"
        else:
            if paragraph:
                return {"synopsis": paragraph, "synopsis_by": f"model {provider.model}"}
            note = "; the compaction model answered nothing"
        finally:
            await provider.close()
    return {"synopsis": digest(text, limit, counter), "synopsis_by": f"extractive digest{note}"}


def _compaction_provider(config: KairoxConfig, session: Session | None) -> ModelProvider | None:
    """The compaction strategy's own provider (built for this call), or None when the
    strategy declares no model (``extractive``)."""
    from kairox_core.compaction.strategies import build_strategy

    writer = build_strategy(config, session).model()
    return writer.provider() if writer is not None else None


async def _ask(
    provider: ModelProvider,
    attachment: Mapping[str, Any],
    text: str,
    config: KairoxConfig,
    counter: TokenCounter,
) -> str:
    from kairox_core.compaction.redaction import redact_secrets

    limit = config.compaction.attachment_max_tokens
    room = max(limit, config.compaction.max_input_tokens - limit - _OVERHEAD)
    pages = f", {attachment['pages']} pages" if attachment.get("pages") else ""
    user = (
        f"Document {attachment_name(attachment)}{pages}:\n\n{digest(text, room, counter)}\n\n"
        f"Write its synopsis: one paragraph, at most about {limit} tokens."
    )
    result = await provider.complete(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        max_tokens=limit,
        temperature=0.0,
    )
    return " ".join(redact_secrets(result.text).split())
