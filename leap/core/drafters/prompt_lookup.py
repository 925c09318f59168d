"""Prompt lookup decoding (Saxena, 2023): copy what followed an earlier occurrence of the last n-gram.

For n from ``max_ngram`` down to ``min_ngram``, find the earliest earlier occurrence of the last n
tokens in the prompt and the generated text, and propose the (up to ``num_tokens``) tokens that
followed it; no match, no draft. transformers' ``prompt_lookup_num_tokens`` is the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError

__all__ = ["PromptLookup"]


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
