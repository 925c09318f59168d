"""Search agents by method name, per prompt, so that an ablation is a command-line flag
(``leap generate --method``). (``leap.bench.methods`` is the benchmark's registry of decoding methods.)

=============  ==============================================================================
``ar``         plain decoding
``self-spec``  a fixed configuration given by the user (``--config`` / ``--skip``)
``leap``       LEAP: zones + groups from the prompt's prefill, zone-aware MCTS (``mcts``)
any agent      a registered agent (``mcts``, ``ucb``, ``bayes``, ``random``, ``zone-rule``, ...) on
               LEAP's space; an agent class that declares ``persistent = True`` (``swift``,
               ``clasp``) is built once and keeps its state across prompts, and its
               ``space_for`` decides its space (theirs: every layer but the first and last
               skippable, no zones)
=============  ==============================================================================

Search over drafters: ``drafters=[...]`` adds the drafter dimension (``leap generate --drafters``,
the ``leap-drafters`` benchmark method); options that cannot draft for the prompt's model (``eagle``
with no trained head for it) are left out with a warning.

Ablations: ``zones=False`` (every layer middle-like), ``groups=False`` (one unit per layer),
``search=False`` (``zone-rule`` instead of the agent: LEAP's "w/o MCTS").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leap.core.errors import SettingsError
from leap.core.modeling.trace import LayerTrace
from leap.search.base import SearchAgent, make_agent, search_agents
from leap.search.drafter_space import expand_settings, option_fingerprints, usable_options, with_drafters
from leap.search.memory import SearchMemory

__all__ = ["agent_factory"]


def agent_factory(
    method: str,
    num_layers: int,
    *,
    zones: bool = True,
    groups: bool = True,
    search: bool = True,
    seed: int | None = None,
    agent_kwargs: dict[str, Any] | None = None,
    drafters: Sequence[str] | None = None,
    zone_metric: str = "residual-ratio",
    group_metric: str = "ear-gain",
    metric_args: dict[str, dict[str, Any]] | None = None,
    low_bit: bool = False,
    memory: SearchMemory | None = None,
    drafter_settings: bool = True,
) -> Callable[[LayerTrace | None], SearchAgent]:
    """A per-prompt agent factory for ``method`` (``leap`` = ``mcts``); with ``drafters`` (drafter
    option strings, see :mod:`leap.search.drafter_space`) the space gains the drafter dimension;
    ``zone_metric``/``group_metric`` fill LEAP's R and Delta L roles (:mod:`leap.redundancy.build`);
    ``low_bit`` adds the per-layer precision action (LOW) to the middle and final zones; ``memory``
    (:class:`~leap.search.memory.SearchMemory`) leaves out the options earlier requests found losing;
    ``drafter_settings`` expands each option over its drafter's declared searchable settings
    (:attr:`~leap.core.drafters.base.Drafter.search_settings`; False: the options as given)."""
    from leap.redundancy.base import redundancy_metrics

    for role in (zone_metric, group_metric):
        redundancy_metrics.get(role)  # an unknown metric fails here, listing the registered ones
    space_kwargs = dict(zone_metric=zone_metric, group_metric=group_metric, metric_args=metric_args or {},
                        low_bit=low_bit)
    name = "mcts" if method == "leap" else method
    if not search:
        name = "zone-rule"
    cls = search_agents.get(name)  # unknown names fail here, listing the registered agents
    kwargs = dict(agent_kwargs or {})
    if cls.persistent:  # one agent for the stream of prompts, built on the first prompt's space
        if drafters:
            raise SettingsError(f"{name} keeps one search across prompts over layer configurations; search "
                                "drafters with a per-prompt agent (leap, mcts, ucb, bayes or random)")
        held: list[SearchAgent] = []

        def persistent(trace: LayerTrace | None) -> SearchAgent:
            if not held:
                held.append(make_agent(name, cls.space_for(trace, num_layers, zones=zones, groups=groups,
                                                           **space_kwargs), seed=seed, **kwargs))
            return held[0]

        return persistent
    if drafters and drafter_settings:
        drafters = expand_settings(drafters)
    counter = iter(range(1_000_000))
    usable: dict[int, tuple] = {}  # per model: the drafter options that can draft for it (checked once)
    stamps: dict[int, dict[str, str]] = {}  # per model: those options' drafter fingerprints (the memory's versions)

    def options_for(trace: LayerTrace | None):
        model = getattr(trace, "model", None)
        if model is None:
            return drafters
        if id(model) not in usable:
            usable[id(model)] = usable_options(drafters, model)
            stamps[id(model)] = option_fingerprints(usable[id(model)], model)
        return memory.prune(usable[id(model)], stamps[id(model)]) if memory is not None else usable[id(model)]

    def factory(trace: LayerTrace | None) -> SearchAgent:
        space = cls.space_for(trace, num_layers, zones=zones, groups=groups, **space_kwargs)
        if drafters:
            space = with_drafters(space, options_for(trace))
        prompt_seed = None if seed is None else seed + next(counter)
        return make_agent(name, space, seed=prompt_seed, **kwargs)

    return factory
