"""leap.search.agents: the built-in search agents, one algorithm per module.

``leap``/``mcts`` (LEAP's zone-aware MCTS, :mod:`.mcts`), ``ucb`` (UCB1 over decision units,
:mod:`.ucb`), ``bayes`` (Gaussian-process Bayesian optimisation: Optuna's GP sampler, :mod:`.bayes`),
``random`` (:mod:`.random_agent`), ``zone-rule`` (LEAP without search, :mod:`.zone_rule`) and the
peers ``swift`` (:mod:`.swift`, with its own GP-UCB in :mod:`.gp`) and ``clasp`` (:mod:`.clasp`). Each subclasses
:class:`leap.search.base.SearchAgent` and registers itself in ``search_agents``; the registry imports
these modules when a name is looked up.

May import: :mod:`leap.search.base`, ``history``, ``drafter_space``, ``external`` (``bayes``), :mod:`leap.redundancy` and
:mod:`leap.core`; never the runner.
"""
