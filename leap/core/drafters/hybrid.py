"""The layer-skip draft as a drafter, and the hybrid of a model-free drafter with it.

* ``layer-skip``: proposes nothing model-free and always lets the step's
  :class:`~leap.core.config.LayerConfig` draft (today's self-speculative drafting, unchanged);
* ``hybrid``: a model-free drafter first (``free``, default ``suffix``); when it proposes fewer than
  ``min_free`` tokens (default 1: it had no candidate), the layer-skip draft *continues the chain*
  from the model-free tokens (they are fed through the draft's layers in one pass, then it drafts
  on under its draft-length policy). Without a ``LayerConfig`` in the step, ``hybrid`` is its
  model-free part alone.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` asks :meth:`continue_with_layers` after
:meth:`propose`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.errors import SettingsError

__all__ = ["LayerSkip", "Hybrid"]


@drafters.register("layer-skip")
class LayerSkip(Drafter):
    """Self-drafting with the model's own layers under the step's LayerConfig (the default)."""

    name = "layer-skip"
    uses_layers = True

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return []

    def continue_with_layers(self, proposed: int) -> bool:
        return True


@drafters.register("hybrid")
class Hybrid(Drafter):
    """A model-free drafter first; the layer-skip draft continues when it has no confident candidate."""

    name = "hybrid"
    uses_layers = True

    def __init__(self, free: str | Drafter = "suffix", min_free: int = 1, **free_kwargs: Any) -> None:
        if min_free < 0:
            raise SettingsError(f"hybrid: min_free must be >= 0, got {min_free}")
        if free in ("hybrid", "layer-skip"):
            raise SettingsError("hybrid: the first part must be a model-free drafter (e.g. suffix, prompt-lookup)")
        self.free = make_drafter(free, **free_kwargs)
        self.min_free = int(min_free)
        self.needs_logits = self.free.needs_logits

    def begin(self, prompt: Sequence[int]) -> None:
        self.free.begin(prompt)

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        return self.free.propose(tokens, max_tokens)

    def continue_with_layers(self, proposed: int) -> bool:
        return proposed < self.min_free

    def observe(self, inputs, logits) -> None:
        self.free.observe(inputs, logits)

    def feedback(self, drafted: int, accepted: int) -> None:
        self.free.feedback(drafted, accepted)

    def finish(self, tokens: Sequence[int]) -> None:
        self.free.finish(tokens)
