"""``bayes``: Bayesian optimisation over the per-unit actions - Optuna's Gaussian-process sampler.

A Gaussian process over the decision units' actions (and a :class:`~leap.search.drafter_space.JointSpace`'s
drafter option), fitted to every configuration's reward, proposing by (log) expected improvement after
``n_init`` space-filling proposals; Draft & Verify optimises its skip set the same way, offline, and here
it runs online on measured steps. Until issue 21 ``bayes`` was a hand-written 49-line GP with expected
improvement; a side-by-side run (``experiments/2026-11-23-sample-efficiency/sample_efficiency.py``, docs/agents.md section 2b) found
it no better per trial than Optuna's ``GPSampler`` (best after 40 trials 0.926 [0.905, 0.947] against
0.926 [0.908, 0.944]), so the name now stands for the maintained sampler: :class:`BayesAgent` is
:class:`~leap.search.external.optuna_agent.GPAgent` under the old name, keeping ``n_init``.

Who calls what: registered in :data:`leap.search.base.search_agents`; ``leap generate --method bayes``.
"""

from __future__ import annotations

from typing import Any

from leap.redundancy.space import SearchSpace
from leap.search.base import search_agents
from leap.search.external.optuna_agent import GPAgent

__all__ = ["BayesAgent"]


@search_agents.register("bayes")
class BayesAgent(GPAgent):
    """GP + expected improvement over per-unit actions (Optuna's ``GPSampler``); the first ``n_init``
    proposals (after LEAP's zone-rule start) fill the space before the GP proposes."""

    name = "bayes"

    def __init__(self, space: SearchSpace, *, n_init: int = 6, **kwargs: Any) -> None:
        kwargs.setdefault("sampler_args", {"n_startup_trials": int(n_init)})
        super().__init__(space, **kwargs)
