"""Online search on a tiny model: lossless while searching, budget respected, fallback to plain."""

from __future__ import annotations

import time

import pytest

from leap.core import SelfSpecDecoder
from leap.search import search_agents
from leap.search.base import SearchAgent
from leap.search.factory import agent_factory
from leap.search.runner import OnlineSearch, SearchSettings

PROMPT = [5, 9, 14, 22, 31, 40, 8, 7]


@pytest.mark.parametrize("method", ["leap", *search_agents.names()])
@pytest.mark.parametrize("reward", ["measured", "cost"])
def test_greedy_output_is_identical_while_searching(tiny_any, method, reward):
    plain = SelfSpecDecoder(tiny_any, None).generate(PROMPT, max_new_tokens=30).token_ids
    factory = agent_factory(method, tiny_any.num_layers, seed=0, agent_kwargs={"min_iterations": 2, "patience": 2}
                            if method not in ("swift",) else {"min_context": 2})
    runner = OnlineSearch(SelfSpecDecoder(tiny_any, None, "fixed", policy_kwargs={"k": 3}), factory,
                          SearchSettings(budget=8, reward=reward))
    start = time.perf_counter()
    out = runner.generate(PROMPT, max_new_tokens=30)
    whole = time.perf_counter() - start
    assert out.generation.token_ids == plain
    assert out.iterations <= 8 and len(out.trials) == out.iterations
    # the overhead is measured inside the call, apart from prefill and decoding steps: never double counted
    assert 0 < out.search_overhead_s and out.generation.wall_time_s + out.search_overhead_s <= whole


def test_cost_reward_search_is_deterministic(tiny_llama):
    """With the cost-model reward and a seeded agent, two searches try the same trials. The loss budget is off: it
    counts the agent's wall time, so under load it stopped one of the two a trial earlier (tests/search under -n 2)."""
    def run():
        runner = OnlineSearch(SelfSpecDecoder(tiny_llama, None), agent_factory("mcts", 6, seed=1),
                              SearchSettings(budget=10, reward="cost", loss_budget=0.0))
        return runner.generate(PROMPT, max_new_tokens=24).trials

    assert run() == run()


class _Bad(SearchAgent):
    """Always proposes drafting with the embedding-only neighbourhood: every layer but one skipped."""

    def ask(self, history):
        choice = [0] + [1 if len(u.actions) > 1 else 0 for u in self.space.units[1:]]
        return self.space.to_config(choice)


def test_falls_back_to_plain_decoding_when_nothing_pays(tiny_qwen2):
    from leap.redundancy import build_search_space

    def factory(trace):
        import numpy as np

        return _Bad(build_search_space(np.ones(6), np.zeros(6), zones=False, groups=False))

    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=12, reward="cost", min_speedup=5.0, give_up=3, loss_budget=0))
    out = runner.generate(PROMPT, max_new_tokens=40)
    assert out.fixed_config is None and out.generation.config is None
    assert out.iterations == 3  # gave up: no step reached min_speedup
    assert out.generation.steps[-1].config is None  # the rest decoded plainly


class _Stubborn(_Bad):
    """Never converges: only the settings stop it."""

    def converged(self, history):
        return False


def _bad_factory(trace):
    import numpy as np
    from leap.redundancy import build_search_space

    return _Stubborn(build_search_space(np.ones(6), np.zeros(6), zones=False, groups=False))


@pytest.mark.parametrize("budget", [0.02, 0.1])
def test_the_search_stops_once_its_loss_budget_is_spent(tiny_qwen2, budget):
    """Losing cheaply: drafts that never pay are tried only until their loss (modelled, so deterministic)
    passes ``loss_budget`` of the request's plain time; the trial that passed it is the last."""
    import dataclasses

    from tests.costs import fake_costs

    # modelled costs of the test's own, not this machine's calibration (measured afresh on an empty $LEAP_CACHE,
    # it could price the bad drafts so cheaply that 40 trials stayed inside 10%): a verification costs 2 steps,
    # so every bad trial loses at least one plain step
    costs = dataclasses.replace(fake_costs(tiny_qwen2.num_layers), verify_curve={1: 2.0, 16: 2.0})
    plain = SelfSpecDecoder(tiny_qwen2, None).generate(PROMPT, max_new_tokens=60).token_ids
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None, costs=costs), _bad_factory,
                          SearchSettings(budget=40, reward="cost", give_up=0, loss_budget=budget))
    out = runner.generate(PROMPT, max_new_tokens=60)
    assert out.stop == "loss_budget" and out.fixed_config is None and out.generation.token_ids == plain
    allowed = budget * (out.generation.prefill_time_s + 60 * out.t_base_s)
    costs = runner.decoder.costs
    losses = [(costs.step_cost(s.drafted, s.layer_passes, s.layer_tokens, s.drafter) - s.committed) * out.t_base_s
              for s in out.generation.steps if s.config is not None]
    assert len(losses) == out.iterations >= 1
    assert sum(losses[:-1]) <= allowed < sum(losses) == pytest.approx(out.search_loss_s)
    unlimited = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None, costs=costs), _bad_factory,
                             SearchSettings(budget=40, reward="cost", give_up=0, loss_budget=0)).generate(
        PROMPT, max_new_tokens=60)
    assert unlimited.iterations > out.iterations and unlimited.stop in ("budget", "done")


class _PlainAsker(_Stubborn):
    """Asks for plain decoding: a trial that 'pays' whenever min_speedup is below 1."""

    def ask(self, history):
        return None


def test_a_space_that_cost_more_than_the_loss_budget_is_not_rebuilt_after_a_search_found_nothing(tiny_qwen2):
    """The space's cost is remembered: after a search that found nothing paying, a request that cannot
    afford the space decodes plainly without building it - 1, 2, 4 requests after 1, 2, 3 fruitless searches
    in a row, then the search is tried again; a long enough request builds it again, and so does every
    request after a search that found something paying."""
    import time as clock

    built = []

    def slow(agent_cls):
        def factory(trace):
            built.append(1)
            clock.sleep(0.3)  # far beyond 3% of this tiny model's plain time for 16 tokens
            import numpy as np
            from leap.redundancy import build_search_space

            return agent_cls(build_search_space(np.ones(6), np.zeros(6), zones=False, groups=False))
        return factory

    # min_speedup 50: every search is fruitless by construction (under load a stubborn draft's measured reward
    # once reached 1.0 and counted as paying)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), slow(_Stubborn),
                          SearchSettings(budget=40, give_up=0, min_speedup=50.0))
    searched = []
    for _ in range(7):  # fruitless searches skip 1, then 2, then 4 requests before the next try
        out = runner.generate(PROMPT, max_new_tokens=16)
        searched.append(out.iterations >= 1)
        if not searched[-1]:
            assert out.stop == "loss_budget" and all(s.config is None for s in out.generation.steps)
        assert out.fixed_config is None
    assert searched == [True, False, True, False, False, True, False] and len(built) == 3
    runner.settings = SearchSettings(budget=40, give_up=0, loss_budget=1e6, min_speedup=50.0)  # one that can afford it
    runner.generate(PROMPT, max_new_tokens=16)
    assert len(built) == 4

    built.clear()
    paying = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), slow(_PlainAsker),
                          SearchSettings(budget=4, give_up=0, min_speedup=0.01))
    for _ in range(2):
        assert paying.generate(PROMPT, max_new_tokens=16).iterations >= 1
    assert len(built) == 2


def test_a_fruitless_streak_on_short_prompts_does_not_skip_a_long_ones_search(tiny_qwen2):
    """Each memory condition keeps its own streak of fruitless searches: after a short prompt's search found nothing
    paying, the next short prompt skips the space, but a long prompt between them still searches (red when one streak
    serves both conditions: the long prompt is decoded plainly without a search)."""
    import time as clock

    import numpy as np

    from leap.redundancy import build_search_space
    from leap.search.memory import SearchMemory

    def slow(trace):
        clock.sleep(0.3)  # far beyond 3% of this tiny model's plain time for 16 tokens
        return _Stubborn(build_search_space(np.ones(6), np.zeros(6), zones=False, groups=False))

    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), slow,
                          SearchSettings(budget=40, give_up=0, min_speedup=50.0),
                          memory=SearchMemory(None, long_prompt=len(PROMPT) + 1))
    outs = [runner.generate(p, max_new_tokens=16) for p in (PROMPT, PROMPT + [3, 4], PROMPT)]
    assert [o.iterations >= 1 for o in outs] == [True, True, False] and outs[2].stop == "loss_budget"


def test_ablation_flags_build_the_right_spaces(tiny_llama):
    session = SelfSpecDecoder(tiny_llama, None).start(PROMPT, max_new_tokens=2, trace_positions=8)
    no_groups = agent_factory("mcts", 6, groups=False)(session.trace)
    assert all(len(u.layers) == 1 for u in no_groups.space.units)
    no_zones = agent_factory("mcts", 6, zones=False)(session.trace)
    assert {z.value for z in no_zones.space.zones} == {"middle"}
    assert agent_factory("leap", 6, search=False)(session.trace).name == "zone-rule"


def test_the_factory_adds_the_precision_action_when_asked(tiny_llama):
    from leap.core import LayerAction
    from leap.core.modeling.trace import capture_trace
    from leap.search.factory import agent_factory

    trace = capture_trace(tiny_llama, [5, 9, 14, 20, 7, 11, 30, 31])
    plain = agent_factory("leap", tiny_llama.num_layers, seed=0)(trace).space
    low = agent_factory("leap", tiny_llama.num_layers, seed=0, low_bit=True)(trace).space
    assert not any(LayerAction.LOW in u.actions for u in plain.units)
    assert [LayerAction.LOW in u.actions for u in low.units] == [u.zone.value != "early" for u in low.units]


def test_a_wall_clock_budget_ends_the_search_and_counts_the_space_it_built(tiny_qwen2):
    """``budget_s`` (issue 34's equal wall-clock budget): the search ends once its seconds are spent, and they count
    from before the space and the agent are built - an agent whose set-up is slow spends its budget there (red when
    the clock starts after the set-up, or when the budget is ignored). The output stays plain decoding's."""
    def slow_factory(trace):
        time.sleep(0.3)
        return _bad_factory(trace)

    plain = SelfSpecDecoder(tiny_qwen2, None).generate(PROMPT, max_new_tokens=40).token_ids
    settings = dict(budget=40, reward="cost", give_up=0, loss_budget=0)
    slow = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), slow_factory, SearchSettings(**settings, budget_s=0.2))
    out = slow.generate(PROMPT, max_new_tokens=40)
    assert (out.stop, out.iterations) == ("time", 0) and out.generation.token_ids == plain
    fast = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), _bad_factory, SearchSettings(**settings, budget_s=60.0))
    assert fast.generate(PROMPT, max_new_tokens=40).iterations > 0
    with pytest.raises(Exception, match="budget_s"):
        SearchSettings(budget_s=-1.0)


@pytest.mark.parametrize("order", [("lowbit", "cascade"), ("cascade", "lowbit")])
def test_a_searchs_cascade_and_lowbit_options_share_one_low_bit_runner(tiny_llama, order):
    """``cascade``'s low-bit part and the ``lowbit`` options take the prompt in once, and each drafts from where the
    other left the context: apart, whichever drafted second paid for catching its own context up in its trial (red when
    :meth:`~leap.core.drafters.hybrid.Cascade.shared_state_key` is None, or when the runner hands the twin itself
    rather than its state's owner). Whichever the space offers first; lossless."""
    labels = {"lowbit": "lowbit:backend=torch-int8", "cascade": "cascade:then_backend=torch-int8"}
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=24).token_ids
    factory = agent_factory("ucb", tiny_llama.num_layers, seed=0, drafters=[labels[name] for name in order])
    runner = OnlineSearch(SelfSpecDecoder(tiny_llama, None), factory,
                          SearchSettings(budget=4, give_up=0, min_speedup=0.0, abandon=0.0))
    assert runner.generate(PROMPT, max_new_tokens=24).generation.token_ids == plain
    made = {option.name: drafter for option, drafter in runner.drafters.items()}
    assert made["lowbit"].runner is not None and made["cascade"].then.runner is made["lowbit"].runner


def test_the_runner_tells_the_memory_which_options_draft_with_one_model(tiny_llama, monkeypatch):
    """``kin`` (SearchSettings, default on) reaches :meth:`~leap.search.memory.SearchMemory.settles` as each option's
    shared-state key: ``lowbit`` and ``cascade`` alike, ``suffix`` apart (red when the runner passes none); off, none."""
    from leap.search.memory import SearchMemory

    told = []
    settles = SearchMemory.settles
    monkeypatch.setattr(SearchMemory, "settles", lambda self, *a, **k: (told.append(k["kin"]), settles(self, *a, **k))[1])
    for kin in (True, False):
        factory = agent_factory("ucb", tiny_llama.num_layers, seed=0,
                                drafters=["lowbit:backend=torch-int8", "cascade:then_backend=torch-int8", "suffix"])
        OnlineSearch(SelfSpecDecoder(tiny_llama, None), factory, SearchSettings(budget=3, give_up=0, kin=kin),
                     memory=SearchMemory(None)).generate(PROMPT, max_new_tokens=16)
        if kin:  # lowbit's settings (num_tokens=6, 10, 14) and cascade: one key; suffix: none
            keys = {label.split(":")[0]: set() for label in told[-1]}
            for label, key in told[-1].items():
                keys[label.split(":")[0]].add(key)
            assert len(keys["lowbit"]) == 1 and None not in keys["lowbit"] and keys["cascade"] == keys["lowbit"]
            assert keys["suffix"] == {None}
        else:
            assert told[-1] is None


@pytest.mark.parametrize("steady", [True, False])
def test_a_trial_starts_a_drafter_that_ramps_up_at_its_pace(tiny_llama, monkeypatch, steady):
    """``steady`` (SearchSettings, default on): each trial of a ``lowbit`` option drafts its first chain at ``adapt``,
    where a request's ramp ends, not at ``num_tokens`` (red when the runner does not call
    :meth:`~leap.core.drafters.base.Drafter.steady_start`, or when ``lowbit``'s does nothing); off, at ``num_tokens``.
    ``cascade`` passes it to its low-bit part. Lossless either way."""
    from leap.core.drafters.lowbit import LowBit
    from leap.search.drafter_space import DraftChoice

    firsts, trial = {}, [None, 0]  # (trial number, label) -> the chain its first draft asked for
    real_trial, real_propose = OnlineSearch._trial, LowBit.propose

    def in_trial(self, session, config, *args):
        trial[:] = [config.drafter.label if isinstance(config, DraftChoice) else None, trial[1] + 1]
        try:
            return real_trial(self, session, config, *args)
        finally:
            trial[0] = None

    def propose(self, tokens, max_tokens):
        if trial[0] is not None:
            firsts.setdefault((trial[1], trial[0]), (self.chain, self.num_tokens, self.adapt))
        return real_propose(self, tokens, max_tokens)

    monkeypatch.setattr(OnlineSearch, "_trial", in_trial)
    monkeypatch.setattr(LowBit, "propose", propose)
    plain = SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=32).token_ids
    drafters = ["lowbit:backend=torch-int8,num_tokens=2,adapt=8", "cascade:then_backend=torch-int8,then_num_tokens=3"]
    factory = agent_factory("ucb", tiny_llama.num_layers, seed=0, drafters=drafters, drafter_settings=False)
    runner = OnlineSearch(SelfSpecDecoder(tiny_llama, None), factory,
                          SearchSettings(budget=6, give_up=0, min_speedup=0.0, abandon=0.0, steady=steady))
    assert runner.generate(PROMPT, max_new_tokens=32).generation.token_ids == plain
    assert {label.split(":")[0] for _, label in firsts} == {"lowbit", "cascade"}
    seen = set()
    for (_, label), (chain, num_tokens, adapt) in sorted(firsts.items()):
        if steady:  # every trial
            assert chain == adapt > num_tokens
        elif label not in seen:  # an option's first trial in the request (a later one goes on where it left off)
            assert chain == num_tokens < adapt
        seen.add(label)
