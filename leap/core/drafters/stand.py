"""``stand``: stochastic adaptive n-gram drafting (STAND's idea: n-gram tables of next-token
*distributions* taken from verification logits, drafted stochastically so that a draft carries a real
draft distribution ``q``).

Tables. For every verified position the verifier's distribution after it is known; STAND keeps, per
context of the last ``j`` tokens (``j = 1..order``), the ``top_k`` most likely next tokens with their
probabilities (renormalised over the ``top_k``; the latest observation of a context replaces the
earlier one, as Token Recycling does for bigrams). Memory is bounded: at most ``max_entries``
contexts, the least recently used evicted first (an ``OrderedDict``). Updates are deterministic for
a given history (``torch.topk`` on the same logits; ties broken by index).

Drafting follows the longest context found in the tables, token by token, up to ``num_tokens``:

* greedy decoding (:meth:`propose`): the most likely stored token - a one-hot draft, as every
  model-free drafter's;
* sampling (:meth:`propose_sampled`): a token drawn from the stored distribution by the Gumbel-max
  trick (Gumbel-Top-1, with the decoder's generator), returned *with* that distribution, which the
  decoder uses as ``q`` in the speculative sampling rule. Any ``q`` keeps the output distribution
  exactly the target's (Leviathan et al., 2023); a ``q`` close to ``p`` is accepted far more often
  than a one-hot draft, whose token is accepted with probability ``p(token)`` only.

Who calls what: :class:`leap.core.decoder.DecodingSession` calls :meth:`observe` after every
verification (``needs_logits``), :meth:`propose` under greedy decoding and :meth:`propose_sampled`
under sampling (``samples_drafts = True``); ``leap bench --methods stand``, ``--drafter stand``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import torch

from leap.core.drafters.base import Drafter, drafters
from leap.core.errors import SettingsError

__all__ = ["Stand"]


@drafters.register("stand")
class Stand(Drafter):
    """STAND-style n-gram tables of next-token distributions from the verifier; stochastic drafts under sampling."""

    name = "stand"
    needs_logits = True
    samples_drafts = True

    def __init__(self, order: int = 3, top_k: int = 8, num_tokens: int = 6, max_entries: int = 100_000) -> None:
        if order < 1 or top_k < 1 or num_tokens < 1 or max_entries < 1:
            raise SettingsError("stand needs order, top_k, num_tokens and max_entries >= 1")
        self.order, self.top_k, self.num_tokens, self.max_entries = int(order), int(top_k), int(num_tokens), \
            int(max_entries)
        # context (tuple of the last j tokens) -> (next token ids, their probabilities), least recent first
        self.table: OrderedDict[tuple[int, ...], tuple[tuple[int, ...], tuple[float, ...]]] = OrderedDict()
        self.history: list[int] = []

    # ------------------------------------------------------------------ learning from the verifier
    def begin(self, prompt: Sequence[int]) -> None:
        self.history = [int(t) for t in prompt]

    def observe(self, inputs: Sequence[int], logits: torch.Tensor) -> None:
        if not inputs:
            return
        if not self.history or self.history[-1] != int(inputs[0]):
            self.history.append(int(inputs[0]))  # the previous step's own token, now pending
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, min(self.top_k, probs.shape[-1]), dim=-1)
        ids, values = top.indices.tolist(), top.values.tolist()
        for i in range(len(inputs)):
            if i:
                self.history.append(int(inputs[i]))
            total = sum(values[i])
            entry = (tuple(ids[i]), tuple(v / total for v in values[i]))
            for j in range(1, min(self.order, len(self.history)) + 1):
                self._store(tuple(self.history[-j:]), entry)

    def _store(self, key: tuple[int, ...], entry) -> None:
        self.table[key] = entry
        self.table.move_to_end(key)
        while len(self.table) > self.max_entries:
            self.table.popitem(last=False)

    def lookup(self, context: Sequence[int]):
        """The stored distribution after the longest known suffix of ``context``, or None."""
        for j in range(min(self.order, len(context)), 0, -1):
            entry = self.table.get(tuple(int(t) for t in context[-j:]))
            if entry is not None:
                self.last_match = j
                return entry
        self.last_match = 0
        return None

    # ------------------------------------------------------------------ drafting
    def _walk(self, tokens: Sequence[int], max_tokens: int, choose) -> list:
        """Follow the tables from ``tokens``: ``choose(ids, probs)`` -> ``(token, item)`` per step."""
        context, out = list(tokens), []
        for _ in range(min(max_tokens, self.num_tokens)):
            entry = self.lookup(context)
            if entry is None:
                break
            token, item = choose(*entry)
            out.append(item)
            context.append(token)
        return out

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        def most_likely(ids, probs):
            token = ids[max(range(len(ids)), key=lambda r: (probs[r], -r))]
            return token, token

        return self._walk(tokens, max_tokens, most_likely)

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int,
                        generator: torch.Generator | None) -> list[tuple[int, dict[int, float]]]:
        """Up to ``max_tokens`` tokens, each drawn from its stored distribution ``q`` (Gumbel-max), with ``q``."""
        device = "cpu" if generator is None else generator.device

        def gumbel_max(ids, probs):
            u = torch.rand(len(ids), generator=generator, dtype=torch.float64, device=device).cpu()
            gumbel = -torch.log(-torch.log(u.clamp(1e-12, 1 - 1e-12)))
            token = ids[int(torch.argmax(torch.log(torch.tensor(probs, dtype=torch.float64)) + gumbel).item())]
            return token, (token, dict(zip(ids, probs)))

        return self._walk(tokens, max_tokens, gumbel_max)
