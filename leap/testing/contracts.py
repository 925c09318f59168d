"""The plug-in contracts, runnable from an installed leap (``leap check --import my_agents``).

leap's own suite runs every registered agent, metric and drafter through contract tests
(``tests/search/test_agent_contract.py``, ``tests/core/runtime/test_host_reads.py``,
``tests/core/drafters/test_drafters.py``); those tests live in the source checkout. A researcher with an
installed leap checks a plug-in here instead: the same contracts, on a synthetic search space and a random
8-layer Llama built in memory (:func:`leap.bench.smoke.build_random_model`), each failure one line saying what
to add.

* agent: every proposal is inside the space (or None, plain decoding); the same seed repeats the search; a
  different seed changes it unless the class declares ``seeded = False``; ``state_dict``/``load_state_dict``
  resume the search; ``best()`` returns a tried configuration or None;
* metric: one finite value per layer; at most one host read per ``compute`` (a GPU sync each);
* drafter: greedy output token-identical to plain decoding, within its declared host-read budget.

Who calls what: ``leap check`` (:mod:`leap.cli.listing`), the pytest classes of :mod:`leap.testing`; ``tests/testing/test_contracts.py``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np

__all__ = ["check_agent", "check_metric", "check_drafter", "contract_model", "run_agent"]


def _space():
    from leap.redundancy import build_search_space

    return build_search_space(np.linspace(1, 0, 16), np.zeros(16) + 0.01, metrics={"cosine": np.linspace(0, 1, 16)})


def _reward(config) -> float:
    """A deterministic synthetic reward: more skipped layers pay, up to a point."""
    if config is None:
        return 1.0
    text = str(config)
    return 1.0 + 0.05 * text.count("S") - 0.004 * text.count("S") ** 2


def run_agent(agent, n: int, history=None, reward=_reward):
    """``n`` ask/record rounds of ``agent`` rewarded by ``reward(config)``; (proposals, history). The contract
    tests in leap's suite drive agents with it too."""
    from leap.search import SearchHistory

    history = history or SearchHistory()
    proposals = []
    for _ in range(n):
        config = agent.ask(history)
        proposals.append(config)
        r = reward(config)
        history.record(config, r)
        agent.record(config, r, history)
    return proposals, history


def check_agent(name: str, trials: int = 10) -> list[str]:
    """The search-agent contract for the registered agent ``name``; one line per failure."""
    from leap.search import make_agent, search_agents

    space, cls, out = _space(), search_agents.get(name), []
    try:
        proposals, history = run_agent(make_agent(name, space, seed=0), trials)
    except Exception as err:  # noqa: BLE001 - every way it fails is the finding
        return [f"agent {name}: ask/record failed on a 16-layer space: {type(err).__name__}: {err}"]
    for config in proposals:
        if config is not None and space.from_config(config) is None:
            out.append(f"agent {name}: ask() proposed {config}, outside the space: build proposals with "
                       "self.space.to_config(choice) from a valid choice (self.space.is_valid)")
            break
    if run_agent(make_agent(name, space, seed=0), trials)[0] != proposals:
        out.append(f"agent {name}: the same seed gave another search: draw every random choice from self.rng")
    seeds = {tuple(map(str, run_agent(make_agent(name, space, seed=s), trials)[0])) for s in range(4)}
    if (len(seeds) > 1) != cls.seeded:
        out.append(f"agent {name}: 4 seeds gave {len(seeds)} distinct searches but the class declares seeded = "
                   f"{cls.seeded}: use self.rng, or declare seeded = False for a deterministic rule")
    agent = make_agent(name, space, seed=0)
    _, history = run_agent(agent, trials // 2)
    clone = make_agent(name, space, seed=1)
    clone.load_state_dict(copy.deepcopy(agent.state_dict()))
    if [clone.ask(history) for _ in range(3)] != [agent.ask(history) for _ in range(3)]:
        out.append(f"agent {name}: load_state_dict(state_dict()) does not resume the search: extend state_dict and "
                   "load_state_dict with your agent's own state (call super() in both)")
    best = make_agent(name, space, seed=0).best(history)
    if best is not None and best not in history.mean_rewards():
        out.append(f"agent {name}: best() returned {best}, never tried: return a configuration from the history "
                   "or None")
    return out


@functools.cache
def contract_model():
    """The random 8-layer Llama (in memory, float32, CPU) the metric and drafter contracts run on (built once)."""
    import torch

    from leap.bench.smoke import build_random_model

    return build_random_model("tiny", "cpu", torch.float32)


def check_metric(name: str, model: Any) -> list[str]:
    """The redundancy-metric contract for ``name`` on ``model``; one line per failure."""
    from leap.core.modeling.trace import capture_trace
    from leap.core.runtime.host_reads import HostReads
    from leap.redundancy.base import make_metric

    trace = capture_trace(model, list(range(4, 30)))
    try:
        metric = make_metric(name)
        with HostReads() as reads:
            values = np.asarray(metric.compute(trace), dtype=float)
    except Exception as err:  # noqa: BLE001
        return [f"metric {name}: compute failed: {type(err).__name__}: {err}"]
    out = []
    if values.shape != (model.num_layers,) or not np.all(np.isfinite(values)):
        out.append(f"metric {name}: compute returned shape {values.shape} (or non-finite values); return one finite "
                   f"value per layer ({model.num_layers})")
    if reads.total > 1:
        out.append(f"metric {name}: compute made {reads.total} host reads (a GPU sync each): compute on the device "
                   "and return leap.core.runtime.device.to_numpy(result) once")
    return out


def check_drafter(name: str, model: Any, max_new_tokens: int = 24) -> list[str]:
    """The drafter contract for ``name`` (its ``example_kwargs``) on ``model``; one line per failure."""
    from leap.core import SelfSpecDecoder
    from leap.core.decoding.session import HOST_READS_PER_STEP
    from leap.core.drafters import drafters
    from leap.core.runtime.host_reads import HostReads

    kwargs = dict(drafters.get(name).example_kwargs)
    prompt = [5, 9, 14, 20, 7, 11, 5, 9, 14, 20, 7, 11, 5, 9]
    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=max_new_tokens).token_ids
    try:
        decoder = SelfSpecDecoder(model, None, drafter=name, drafter_kwargs=kwargs)
        session = decoder.start(prompt, max_new_tokens=max_new_tokens)
        worst = 0
        while not session.done:
            with HostReads() as reads:
                record = session.step()
            budget = HOST_READS_PER_STEP + decoder.drafter.host_reads_per_step + decoder.drafter.host_reads_per_node * record.drafted
            worst = max(worst, reads.total - budget)
    except Exception as err:  # noqa: BLE001
        return [f"drafter {name}: decoding failed: {type(err).__name__}: {err}"]
    out = []
    got = session.outcome().token_ids
    if got != plain:
        at = next((i for i, (a, b) in enumerate(zip(got, plain)) if a != b), min(len(got), len(plain)))
        out.append(f"drafter {name}: greedy output differs from plain decoding at token {at}: a drafter proposes, "
                   "never commits (check what propose returns and which hooks you override)")
    if worst > 0:
        out.append(f"drafter {name}: a step made {worst} host reads beyond its declared budget: declare "
                   "host_reads_per_step / host_reads_per_node, or keep its tensors on the device")
    return out
