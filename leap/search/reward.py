"""Rewards of one draft/verify step, from measured time or from a deterministic cost model.

* :class:`MeasuredSpeedup` (LEAP's reward): ``s = committed * t_base / (t_draft + t_verify)``, with
  ``t_base`` the measured time of one plain decoding step in the same process.
* :class:`CostModelSpeedup`: ``s = committed / (drafted * passes / L + 1 + beta * drafted)``, the
  speedup if a draft token cost its share of layer evaluations of a full forward and verifying ``k``
  tokens cost ``1 + beta k`` forwards. Deterministic for greedy decoding: for reproducible research,
  tests and the cost-model environment.

Both give 1.0 for a plain step (no draft, one token, one forward's time).
Who calls what: :class:`leap.search.runner.OnlineSearch` and the environment call ``reward(step)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from leap.core.outcome import StepRecord

__all__ = ["MeasuredSpeedup", "CostModelSpeedup", "make_reward"]


@dataclass
class MeasuredSpeedup:
    """Wall-clock speedup of a step over plain decoding (``t_base`` set by the runner)."""

    t_base: float = 0.0
    name: str = "measured"

    def __call__(self, step: StepRecord, num_layers: int) -> float:
        if self.t_base <= 0:
            raise RuntimeError("MeasuredSpeedup needs t_base, the time of a plain step, before use")
        return step.committed * self.t_base / max(step.time_s, 1e-9)


@dataclass
class CostModelSpeedup:
    """Deterministic speedup from layer evaluations (see the module docstring)."""

    beta: float = 0.05
    name: str = "cost"

    def __call__(self, step: StepRecord, num_layers: int) -> float:
        cost = step.layer_passes / num_layers + 1.0 + self.beta * step.drafted
        return step.committed / cost


def make_reward(kind: str, **kwargs):
    if kind == "measured":
        return MeasuredSpeedup(**kwargs)
    if kind == "cost":
        return CostModelSpeedup(**kwargs)
    from leap.core.errors import SettingsError

    raise SettingsError(f"unknown reward {kind!r}; use 'measured' or 'cost'")
