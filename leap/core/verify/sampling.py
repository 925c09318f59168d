"""Acceptance rules: greedy prefix matching and speculative sampling.

Speculative sampling (Leviathan et al., 2023, "Fast Inference from Transformers via Speculative
Decoding", Algorithm 1; Chen et al., 2023): draft tokens ``x_i ~ q_i`` are accepted one by one with
probability ``min(1, p_i(x_i) / q_i(x_i))``; at the first rejection a token is drawn from the residual
``norm(max(0, p_i - q_i))``; if all ``k`` are accepted a bonus token is drawn from ``p_{k+1}``. The
output then follows the target distribution ``p`` exactly, whatever ``q`` is. Variables are named as in
the paper. Greedy decoding is the temperature-0 limit: accept the longest prefix on which the draft
agrees with the target's argmax, then append the target's own token.

Who calls what: :class:`leap.core.decoding.decoder.DecodingSession` calls :func:`target_probs` on the draft's
and the verifier's logits, then :func:`greedy_accept` or :func:`speculative_accept`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch

from leap.core.errors import SettingsError

__all__ = ["SamplingSettings", "target_probs", "greedy_accept", "speculative_accept", "sample", "tree_accept",
           "draft_rows", "greedy_accept_deferred", "greedy_accept_rows", "DenseDraw"]


@dataclass(frozen=True)
class SamplingSettings:
    """Temperature and nucleus (top-p) settings; ``temperature == 0`` means greedy.

    Raises:
        SettingsError: negative or non-finite temperature, top-p outside (0, 1].
    """

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        t, p = float(self.temperature), float(self.top_p)
        if not (t >= 0.0) or t == float("inf"):
            raise SettingsError(f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature}")
        if not (0.0 < p <= 1.0):
            raise SettingsError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def target_probs(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """``[q, V]`` logits -> ``[q, V]`` probabilities after temperature and top-p (float32)."""
    logits = logits.float()
    if settings.greedy:
        return torch.softmax(logits, dim=-1)
    probs = torch.softmax(logits / settings.temperature, dim=-1)
    if settings.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass strictly before each token
        sorted_probs = sorted_probs.masked_fill(before >= settings.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class DenseDraw(Mapping):
    """A draft distribution over the whole vocabulary, kept as one ``[V]`` probability tensor: a sampling drafter
    that draws from its full distribution (``lowbit`` with ``top_k=0``) returns one instead of a ``{token: q}``
    map of ~50k entries, which would cost more to build than the draft pass. It reads as that map - tokens of
    non-zero probability and their probabilities - so every acceptance rule takes it; :func:`draft_rows` copies
    its row whole. Truncating ``q`` to its top tokens loses the tail mass from the acceptance ``sum(min(p, q))``:
    on the default model at T = 1, 0.96 for the whole vocabulary against 0.89 for the top 64
    (experiments/2026-11-26-drafters-notebook)."""

    __slots__ = ("probs",)

    def __init__(self, probs: torch.Tensor) -> None:
        if probs.dim() != 1:
            raise ValueError(f"DenseDraw takes one [V] probability vector, got shape {tuple(probs.shape)}")
        self.probs = probs

    def __getitem__(self, token: int) -> float:
        value = self.probs[token].item() if 0 <= int(token) < self.probs.numel() else 0.0
        if value <= 0.0:
            raise KeyError(token)
        return value

    def __iter__(self) -> Iterator[int]:
        return iter(torch.nonzero(self.probs > 0).flatten().tolist())

    def __len__(self) -> int:
        return (self.probs > 0).sum().item()


def draft_rows(distributions: list[Mapping[int, float]], vocab: int, device) -> torch.Tensor:
    """``[len(distributions), vocab]`` draft distributions from sparse ``{token: q}`` maps, filled on
    ``device`` in one scatter (two host-to-device copies, whatever the number of rows), and
    :class:`DenseDraw` rows copied whole (one more copy for all of them)."""
    rows = torch.zeros(len(distributions), vocab, device=device)
    dense, sparse = [], []
    for i, q in enumerate(distributions):
        (dense if isinstance(q, DenseDraw) else sparse).append((i, q))
    if dense:
        rows[[i for i, _ in dense]] = torch.stack([q.probs.float() for _, q in dense]).to(device)
    if sparse:
        index = torch.tensor([(i, t) for i, q in sparse for t in q], device=device)
        values = torch.tensor([v for _, q in sparse for v in q.values()], device=device)
        rows[index[:, 0], index[:, 1]] = values
    return rows


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id drawn from a ``[V]`` probability vector."""
    return int(torch.multinomial(probs, 1, generator=generator).item())


def greedy_accept(draft: list[int], target_logits: torch.Tensor) -> tuple[int, int]:
    """Longest prefix of ``draft`` equal to the target's argmax, and the token that follows it.

    Args:
        draft: ``k`` draft tokens.
        target_logits: ``[k + 1, V]`` verifier logits; row ``i`` predicts the token after draft ``i-1``.

    Returns:
        ``(accepted, next_token)``: ``accepted`` draft tokens are kept, then ``next_token`` (the
        correction at the first mismatch, or the bonus token when all ``k`` match).
    """
    return _longest_match(draft, target_logits.argmax(dim=-1).tolist())


def greedy_accept_rows(drafts: Sequence[Sequence[int]], target_logits: torch.Tensor) -> list[tuple[int, int]]:
    """:func:`greedy_accept` of every row of a batch at once: ``drafts[i]`` is row ``i``'s chain and
    ``target_logits[i, : len(drafts[i]) + 1]`` its verifier logits (``[B, q, V]``, rows padded to ``q``). The target's
    choices come to the host in one read for the whole batch, not one per row (on a GPU each read waits for the
    device). Called by :meth:`leap.core.decoding.batch_session.BatchSession.step`."""
    choices = target_logits.argmax(dim=-1).tolist()
    return [_longest_match(list(draft), row[: len(draft) + 1]) for draft, row in zip(drafts, choices)]


def greedy_accept_deferred(known: list[int], pending: torch.Tensor, target_logits: torch.Tensor
                           ) -> tuple[int, int, list[int]]:
    """:func:`greedy_accept` of the draft ``known + pending`` whose last tokens (``pending``, ``[n]``) are still
    on the device: they and the target's choices come to the host in one read. Returns ``(accepted,
    next_token, pending as ints)``."""
    values = torch.cat([pending.view(-1), target_logits.argmax(dim=-1)]).tolist()
    chain = values[: pending.numel()]
    accepted, next_token = _longest_match([*known, *chain], values[pending.numel():])
    return accepted, next_token, chain


def _longest_match(draft: list[int], targets: list[int]) -> tuple[int, int]:
    accepted = 0
    for d, t in zip(draft, targets):
        if d != t:
            break
        accepted += 1
    return accepted, int(targets[accepted])


def speculative_accept(
    draft: list[int],
    q: torch.Tensor,
    p: torch.Tensor,
    generator: torch.Generator | None,
) -> tuple[int, int]:
    """Leviathan et al.'s acceptance rule.

    Args:
        draft: ``k`` draft tokens ``x_1..x_k``, drawn from ``q``.
        q: ``[k, V]`` draft distributions ``q_i`` (zero outside a restricted draft vocabulary is fine).
        p: ``[k + 1, V]`` target distributions ``p_i``.
        generator: source of the uniform draws ``r_i`` and of the residual / bonus samples.

    Returns:
        ``(accepted, next_token)`` as in :func:`greedy_accept`.
    """
    k = len(draft)
    if not k:
        return 0, sample(p[0], generator)
    # all on the device, one read at the end (the accepted count and the next token together)
    idx = torch.arange(k, device=p.device)
    x = torch.as_tensor(draft, device=p.device)
    ratio = p[idx, x] / q[idx, x].clamp_min(1e-20)
    r = torch.rand(k, generator=generator, device=p.device)
    rejected = r >= ratio
    # the first rejected position, or k when every draft token is accepted
    first = torch.where(rejected.any(), rejected.int().argmax(), torch.tensor(k, device=p.device))
    i = first.clamp(max=k - 1)
    residual = (p[i] - q[i]).clamp_min(0.0)
    mass = residual.sum()
    # mass == 0 only if p_i == q_i, where rejection has probability 0; fall back to p_i.
    corrected = torch.where(mass > 0, residual / mass.clamp_min(1e-30), p[i])
    dist = torch.where(first < k, corrected, p[k])
    token = torch.multinomial(dist, 1, generator=generator)[0]
    accepted, next_token = torch.stack([first, token]).tolist()
    return int(accepted), int(next_token)


def tree_accept(
    tree, target_logits: torch.Tensor, settings: SamplingSettings, generator: torch.Generator | None
) -> tuple[list[int], int]:
    """Accept along a :class:`~leap.core.trees.draft_tree.DraftTree` of deterministic drafts.

    ``target_logits[r]`` is the target's distribution after row ``r`` (row 0 = the pending token).
    From the root: take the target's token (argmax when greedy, else a sample from ``p``); if a child
    carries it, move there and repeat; else stop. Returns (accepted rows, next token). Each committed
    token is drawn from ``p`` given the committed prefix, so the output distribution is plain
    decoding's (SpecInfer's multi-candidate rule with one-hot draft distributions).
    """
    rows: list[int] = []
    row = 0
    # one read for the whole tree: every row's token (argmax, or an independent draw from its p - only
    # the rows on the walked path are used, so each committed token is still a draw from p given its prefix)
    if settings.greedy:
        tokens = target_logits.argmax(dim=-1).tolist()
    else:
        tokens = torch.multinomial(target_probs(target_logits, settings), 1, generator=generator)[:, 0].tolist()
    while True:
        token = tokens[row]
        child = tree.children(row).get(token)
        if child is None:
            return rows, token
        rows.append(child)
        row = child
