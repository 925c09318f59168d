"""leap.search.external: search agents that drive optimizers the field already maintains.

``optuna``, ``optuna-tpe``, ``optuna-gp``, ``optuna-cmaes``, ``optuna-qmc`` (Optuna's samplers,
:mod:`.optuna_agent`; Optuna is a dependency) and, when the optional extra ``leap[nevergrad]`` is
installed, ``nevergrad``, ``nevergrad-ngopt``, ``nevergrad-de``, ``nevergrad-portfolio``
(:mod:`.nevergrad_agent`). Each adapter maps the :class:`~leap.redundancy.space.SearchSpace`'s decision
units onto the library's parameters and its ask/tell loop onto :class:`leap.search.base.SearchAgent`,
so the runner, the benchmarks and the registry-wide agent contract tests treat them like the built-ins.

May import: :mod:`leap.search.base`, ``history``, :mod:`leap.redundancy` and :mod:`leap.core`.
"""
