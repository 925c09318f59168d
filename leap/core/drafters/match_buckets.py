"""Running acceptance statistics per *match bucket*: the one statistic ``gated`` and ``select`` share.

A model-free draft is as good as the context match behind it: a 6-token suffix match is accepted far
more often than a 1-token one. A drafter exposes that signal as :attr:`Drafter.last_match`
(:mod:`leap.core.drafters.base`); the bucket of a proposal is ``min(max_bucket, last_match)`` (the
proposal's length for drafters without a match signal). Per key (a bucket, or a (candidate, bucket)
pair) :class:`MatchBuckets` keeps an exponentially weighted mean of accepted tokens per draft: the
plain mean for the first ``1 / decay`` observations, then weight ``decay`` on the newest, so that it
tracks a drift within a long generation. Keys never seen read as ``prior``.

Who calls what: :class:`leap.core.drafters.gated.Gated` and :class:`leap.core.drafters.select.Select`.
"""

from __future__ import annotations

from collections.abc import Hashable

from leap.core.errors import SettingsError

__all__ = ["MatchBuckets", "bucket_of"]


def bucket_of(drafter, proposed: int, max_bucket: int) -> int:
    """The match bucket of ``drafter``'s latest proposal of ``proposed`` tokens."""
    match = drafter.last_match
    return min(int(max_bucket), int(match if match else proposed))


class MatchBuckets:
    """``mean[key]`` (accepted tokens per draft) and ``count[key]`` (drafts seen), see the module docstring."""

    def __init__(self, prior: float, decay: float) -> None:
        if not 0 < decay <= 1 or prior < 0:
            raise SettingsError(f"match buckets need 0 < decay <= 1 and prior >= 0, got decay={decay}, prior={prior}")
        self.prior, self.decay = float(prior), float(decay)
        self.mean: dict[Hashable, float] = {}
        self.count: dict[Hashable, int] = {}

    def expected(self, key: Hashable) -> float:
        return self.mean.get(key, self.prior)

    def learn(self, key: Hashable, accepted: float) -> None:
        n = self.count.get(key, 0) + 1
        self.count[key] = n
        mean = self.expected(key)
        self.mean[key] = mean + max(1.0 / n, self.decay) * (accepted - mean)
