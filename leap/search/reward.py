"""Rewards of one draft/verify step, from measured time or from a deterministic cost model.

* :class:`MeasuredSpeedup` (LEAP's reward): ``s = committed * t_base / (t_draft + t_verify)``, with
  ``t_base`` the measured time of one plain decoding step in the same process.
* :class:`CostModelSpeedup`: ``s = committed / step_cost``, with the step's cost predicted from the
  machine's calibration (:mod:`leap.core.decoding.calibrate`): the verification curve ``c(drafted + 1)``,
  the draft's layer passes and LM-head evaluations, and a model-free drafter's own overhead, all in
  plain steps. Deterministic for greedy decoding given the calibration: for reproducible research,
  tests and the cost-model environment.

Both give 1.0 for a plain step (no draft, one token, one forward's time).
Who calls what: :class:`leap.search.runner.OnlineSearch` and the environment call ``reward(step)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leap.core.runtime.costs import Calibration
from leap.core.decoding.outcome import StepRecord

__all__ = ["MeasuredSpeedup", "CostModelSpeedup", "make_reward"]


@dataclass
class MeasuredSpeedup:
    """Wall-clock speedup of a step over plain decoding (``t_base`` set by the runner)."""

    t_base: float = 0.0
    name: str = "measured"

    def __call__(self, step: StepRecord, num_layers: int) -> float:
        return self.trial([step])

    def trial(self, steps: Sequence[StepRecord]) -> float:
        """Several steps rewarded as one: their tokens over their time."""
        if self.t_base <= 0:
            raise RuntimeError("MeasuredSpeedup needs t_base, the time of a plain step, before use")
        return sum(s.committed for s in steps) * self.t_base / max(sum(s.time_s for s in steps), 1e-9)


@dataclass
class CostModelSpeedup:
    """Deterministic speedup predicted by the calibrated cost model (see the module docstring)."""

    costs: Calibration
    name: str = "cost"

    def __call__(self, step: StepRecord, num_layers: int) -> float:
        return self.trial([step])

    def trial(self, steps: Sequence[StepRecord]) -> float:
        """Several steps rewarded as one: their tokens over their summed predicted cost."""
        return sum(s.committed for s in steps) / sum(self.predicted_cost(s) for s in steps)

    def predicted_cost(self, step: StepRecord) -> float:
        """The step's predicted time in plain steps."""
        return self.costs.step_cost(step.drafted, step.layer_passes, step.layer_tokens, step.drafter)


def make_reward(kind: str, **kwargs):
    """``make_reward("measured", t_base=...)`` or ``make_reward("cost", costs=calibration)``."""
    if kind == "measured":
        return MeasuredSpeedup(**kwargs)
    if kind == "cost":
        return CostModelSpeedup(**kwargs)
    from leap.core.errors import SettingsError

    raise SettingsError(f"unknown reward {kind!r}; use 'measured' or 'cost'")
