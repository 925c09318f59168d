"""Decoding methods by name, so that an ablation is a command-line flag (``leap generate --method``).

=============  ==============================================================================
``ar``         plain decoding
``self-spec``  a fixed configuration given by the user (``--config`` / ``--skip``)
``leap``       LEAP: zones + groups from the prompt's prefill, zone-aware MCTS (``mcts``)
any agent      a registered agent (``mcts``, ``ucb``, ``bayes``, ``random``, ``zone-rule``, ...) on
               LEAP's space; ``swift`` and ``clasp`` get the baseline space (every layer but the
               first and last skippable, no zones) and keep their state across prompts
=============  ==============================================================================

Search over drafters: ``drafters=[...]`` adds the drafter dimension (``leap generate --drafters``,
the ``leap-drafters`` benchmark method).

Ablations: ``zones=False`` (every layer middle-like), ``groups=False`` (one unit per layer),
``search=False`` (``zone-rule`` instead of the agent: LEAP's "w/o MCTS").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leap.core.errors import SettingsError
from leap.core.trace import LayerTrace
from leap.search.base import SearchAgent, make_agent, search_agents
from leap.search.drafter_space import with_drafters
from leap.search.runner import baseline_space, build_space

__all__ = ["agent_factory", "PERSISTENT_AGENTS"]

PERSISTENT_AGENTS = {"swift", "clasp"}  # baselines that search once over the data stream


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
) -> Callable[[LayerTrace | None], SearchAgent]:
    """A per-prompt agent factory for ``method`` (``leap`` = ``mcts``); with ``drafters`` (drafter
    option strings, see :mod:`leap.search.drafter_space`) the space gains the drafter dimension."""
    name = "mcts" if method == "leap" else method
    if not search:
        name = "zone-rule"
    search_agents.get(name)  # unknown names fail here, listing the registered agents
    kwargs = dict(agent_kwargs or {})
    if name in PERSISTENT_AGENTS:
        if drafters:
            raise SettingsError(f"{name} searches layer skip sets only; search drafters with leap, mcts, ucb, "
                                "bayes or random")
        agent = make_agent(name, baseline_space(num_layers), seed=seed, **kwargs)
        return lambda trace: agent
    counter = iter(range(1_000_000))

    def factory(trace: LayerTrace | None) -> SearchAgent:
        if trace is None:
            raise SettingsError("LEAP's search space needs a prefill trace; the prompt must have 2+ tokens")
        space = build_space(trace, zones=zones, groups=groups)
        if drafters:
            space = with_drafters(space, drafters)
        prompt_seed = None if seed is None else seed + next(counter)
        return make_agent(name, space, seed=prompt_seed, **kwargs)

    return factory
