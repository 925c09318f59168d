"""Model-free drafters: propose candidate tokens without running the model.

A :class:`Drafter` proposes a chain of tokens (deterministically: draft probability 1, a one-hot
``q`` for speculative sampling) and hears how many were accepted; it never verifies. The decoder's
verify/accept/rollback path is shared with the layer-skip draft, so losslessness holds for every
drafter (tested). Register with ``@drafters.register("name")``; third parties use the entry-point group
``leap.drafters``.

* ``prompt-lookup`` - prompt lookup decoding (Saxena, 2023): for n from ``max_ngram`` down to
  ``min_ngram``, find the earliest earlier occurrence of the last n tokens in the prompt and the
  generated text, and propose the (up to ``num_tokens``) tokens that followed it; no match, no draft.

Who calls what: :class:`leap.core.decoder.DecodingSession` calls :meth:`Drafter.propose` in step 1
(draft) when the decoder was built with ``drafter=``, and :meth:`Drafter.feedback` after acceptance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leap.core.errors import SettingsError
from leap.core.registry import Registry

__all__ = ["Drafter", "PromptLookup", "drafters", "make_drafter"]


class Drafter:
    """Base class: override :meth:`propose`."""

    name = "base"

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        """Up to ``max_tokens`` candidate tokens to follow ``tokens`` (prompt + output so far)."""
        raise NotImplementedError

    def feedback(self, drafted: int, accepted: int) -> None:
        """``accepted`` of the ``drafted`` proposed tokens were kept."""


drafters: Registry[type[Drafter]] = Registry("drafter", "leap.drafters")


@drafters.register("prompt-lookup")
class PromptLookup(Drafter):
    """Prompt lookup decoding: copy what followed the earliest earlier match of the last n-gram."""

    name = "prompt-lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, num_tokens: int = 10) -> None:
        if not 1 <= min_ngram <= max_ngram or num_tokens < 1:
            raise SettingsError("prompt-lookup needs 1 <= min_ngram <= max_ngram and num_tokens >= 1")
        self.max_ngram, self.min_ngram, self.num_tokens = int(max_ngram), int(min_ngram), int(num_tokens)

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        tokens = list(tokens)
        limit = min(max_tokens, self.num_tokens)
        for n in range(min(self.max_ngram, len(tokens) - 1), self.min_ngram - 1, -1):
            tail = tokens[-n:]
            first = tail[0]
            for start in range(len(tokens) - n):
                if tokens[start] == first and tokens[start : start + n] == tail:
                    continuation = tokens[start + n : start + n + limit]
                    if continuation:
                        return continuation
        return []


def make_drafter(drafter: str | Drafter, **kwargs: Any) -> Drafter:
    return drafter if isinstance(drafter, Drafter) else drafters.create(drafter, **kwargs)
