"""``LeapDrafterSearch-v0``: ``LeapLayerSearch-v0`` plus the drafter as one more action dimension.

Same episodes, observations, rewards and termination as ``v0`` (:mod:`leap.envs.layer_search`);
the action gains a last entry, the index of a drafter option (``drafters``, default :data:`V1_DRAFTERS`:
layer-skip, prompt lookup, suffix, gated, hybrid, stand chains and OPT-Tree trees - the search's
defaults when it was registered, frozen so the action space keeps its meaning; the search's
:data:`~leap.search.drafter_space.DEFAULT_DRAFTERS` has since gained ``lowbit``, ``cascade`` and ``eagle``: pass
``drafters=DEFAULT_DRAFTERS`` for them):

* **Action**: ``MultiDiscrete([3] * units + [len(drafters)])``. The unit entries are the layer
  configuration (used by options that draft with layers: ``layer-skip``, ``hybrid``; ignored by
  model-free ones); ``info["action_mask"]`` still masks the unit entries, ``info["drafters"]`` names
  the options, ``info["config"]`` is the :class:`~leap.search.drafter_space.DraftChoice` run.

One drafter instance per option lives as long as the environment (Token Recycling's matrix and the
suffix drafter's earlier outputs carry over between episodes, as in a serving system) and every
instance observes every verification of an episode, whichever option drafted it.
``LeapLayerSearch-v0`` keeps its meaning; ``LeapDrafterSearchCost-v0`` is this with the cost model and
``persist_drafters=False`` (fresh drafters every episode, so episodes are deterministic).
Options that cannot draft for the model (``eagle`` where no head was trained for it) are left out with a
warning; ``info["drafters"]`` names the options kept, in action order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from leap.envs.layer_search import LeapLayerSearchEnv

__all__ = ["LeapDrafterSearchEnv"]

#: the drafter options of ``LeapDrafterSearch-v0`` by default (fixed: a new option would change the action space)
V1_DRAFTERS = ("layer-skip", "prompt-lookup", "suffix", "gated", "hybrid:free=suffix", "stand", "stand:shape=opt")


class LeapDrafterSearchEnv(LeapLayerSearchEnv):
    """See the module docstring; constructor arguments as ``v0`` plus ``drafters``."""

    def __init__(self, *args: Any, drafters: Sequence[str] | None = None, persist_drafters: bool = True,
                 **kwargs: Any) -> None:
        from leap.core.modeling.model import LeapModel, load_model
        from leap.search.drafter_space import usable_options

        model = args[0] if args else kwargs.pop("model", "smollm2")
        if not isinstance(model, LeapModel):  # loaded here: the options that cannot draft for it are left out
            model = load_model(model, device=kwargs.pop("device", "auto"), dtype=kwargs.pop("dtype", None))
        self.options = list(usable_options(drafters or V1_DRAFTERS, model))
        self.persist_drafters = persist_drafters
        self.drafters = self._new_drafters()
        super().__init__(model, *args[1:], **kwargs)
        self.action_space = spaces.MultiDiscrete([len(self.canonical)] * len(self.space.units) + [len(self.options)])

    def _new_drafters(self) -> list:
        from leap.core.drafters import make_drafter

        return [make_drafter(o.name, **o.kwargs) for o in self.options]

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {**super()._info(**extra), "drafters": [o.label for o in self.options]}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if not self.persist_drafters:
            self.drafters = self._new_drafters()
        super_reset = super().reset(seed=seed, options=options)
        for d in self.drafters:
            self.session.attach(d)
        return super_reset

    def config_of(self, action: Sequence[int]):
        """The :class:`DraftChoice` an action encodes, and how many unit actions were illegal."""
        from leap.search.drafter_space import DraftChoice

        action = np.asarray(action, dtype=np.int64)
        config, illegal = super().config_of(action[:-1])
        option = self.options[int(action[-1])]
        return DraftChoice(option, config if option.uses_layers else None), illegal

    def step(self, action):
        self._check_running()
        choice, illegal = self.config_of(action)
        drafter = self.drafters[self.options.index(choice.drafter)]
        record = self.session.step(choice.config, drafter=drafter)
        return self._after_step(record, illegal, choice)
