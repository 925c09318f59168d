"""leap.envs: Gymnasium environments. Importing ``leap`` registers them (entry points are lazy).

* ``LeapLayerSearch-v0`` - measured (wall-clock) reward, ``nondeterministic=True``;
* ``LeapLayerSearchCost-v0`` - deterministic cost-model reward;
* ``LeapDrafterSearch-v0`` / ``LeapDrafterSearchCost-v0`` - the same plus the drafter as one more
  action dimension (:mod:`leap.envs.drafter_search`);
* ``LeapBatchSpec-v0`` - how far to speculate in a batch of B requests (:mod:`leap.envs.batch_search`): the
  action is each batched step's chain cap, the reward its goodput over plain batched decoding.

``gym.make("leap.envs:LeapLayerSearch-v0")`` imports this module, which registers the ids.

Vectorised: ``gym.make_vec(id, num_envs=N, vectorization_mode="sync" | "async", model=..., ...)``. Async
workers are forked processes, and torch's intra-op thread pool does not survive a fork (a forked worker
hangs in its first parallel op); so a process forked from one that imported this module runs torch on
one thread (``os.register_at_fork``) - one environment per worker, the workers sharing the cores. Each
async worker loads its own model: pass a name or path, not a loaded model, to keep memory down.

May import: :mod:`leap.core`, :mod:`leap.redundancy`, :mod:`leap.search` and :mod:`leap.data`.
"""

from __future__ import annotations

import os

import gymnasium as gym

__all__ = ["register_envs", "ENV_IDS"]

ENV_IDS = ("LeapLayerSearch-v0", "LeapLayerSearchCost-v0", "LeapDrafterSearch-v0", "LeapDrafterSearchCost-v0",
           "LeapBatchSpec-v0")


def register_envs() -> None:
    """Register leap's environment ids (idempotent)."""
    if "LeapLayerSearch-v0" not in gym.registry:
        gym.register(id="LeapLayerSearch-v0", entry_point="leap.envs.layer_search:LeapLayerSearchEnv",
                     nondeterministic=True, kwargs={"reward": "measured"})
    if "LeapLayerSearchCost-v0" not in gym.registry:
        gym.register(id="LeapLayerSearchCost-v0", entry_point="leap.envs.layer_search:LeapLayerSearchEnv",
                     kwargs={"reward": "cost"})
    if "LeapBatchSpec-v0" not in gym.registry:
        gym.register(id="LeapBatchSpec-v0", entry_point="leap.envs.batch_search:LeapBatchSpecEnv",
                     nondeterministic=True)
    if "LeapDrafterSearch-v0" not in gym.registry:
        gym.register(id="LeapDrafterSearch-v0", entry_point="leap.envs.drafter_search:LeapDrafterSearchEnv",
                     nondeterministic=True, kwargs={"reward": "measured"})
    if "LeapDrafterSearchCost-v0" not in gym.registry:
        gym.register(id="LeapDrafterSearchCost-v0", entry_point="leap.envs.drafter_search:LeapDrafterSearchEnv",
                     kwargs={"reward": "cost", "persist_drafters": False})


def _one_thread_after_fork() -> None:
    import torch

    torch.set_num_threads(1)


register_envs()
os.register_at_fork(after_in_child=_one_thread_after_fork)
