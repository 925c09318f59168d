"""OnlineSearch with several real steps per search iteration (SearchSettings.steps_per_trial)."""

from __future__ import annotations

import time

import pytest

from leap.core import SelfSpecDecoder
from leap.core.drafters import Drafter
from leap.core.errors import SettingsError
from leap.search.base import SearchAgent
from leap.search.drafter_space import DraftChoice, JointSpace, parse_option
from leap.search.factory import agent_factory
from leap.search.runner import OnlineSearch, SearchSettings, baseline_space


def test_each_trial_spans_steps_per_trial_steps_and_output_stays_lossless(tiny_llama):
    prompt = [5, 6, 7, 8] * 3
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=40).token_ids
    factory = agent_factory("ucb", tiny_llama.num_layers, seed=0, drafters=["suffix", "prompt-lookup"])
    settings = SearchSettings(budget=5, steps_per_trial=3, give_up=0, min_speedup=0.0, abandon=0.0)
    out = OnlineSearch(SelfSpecDecoder(tiny_llama, None), factory, settings).generate(prompt, max_new_tokens=40)
    assert out.generation.token_ids == plain
    assert 1 <= out.iterations <= 5
    searched_steps = len(out.generation.steps) - settings.base_steps
    # every trial but possibly the last (the prompt may end) covers 3 steps
    assert sum(t["committed"] for t in out.trials) <= out.generation.new_tokens
    assert all(t["committed"] >= 3 for t in out.trials[:-1])
    assert searched_steps >= 3 * (out.iterations - 1) + 1


def test_bad_search_settings_name_the_fix():
    with pytest.raises(SettingsError, match="steps_per_trial"):
        SearchSettings(steps_per_trial=0)
    with pytest.raises(SettingsError, match="reward"):
        SearchSettings(reward="fast")
    with pytest.raises(SettingsError, match="abandon"):
        SearchSettings(abandon=1.0)


class _Oracle(Drafter):
    """Proposes two tokens of the plain output (the test fills :attr:`reference`): every step commits three."""

    name = "oracle"
    reference: list[int] = []

    def begin(self, prompt):
        self.prompt_len = len(prompt)

    def propose(self, tokens, max_tokens):
        done = len(tokens) - self.prompt_len
        return list(self.reference[done: done + min(max_tokens, 2)])


class _Wrong(Drafter):
    """Proposes tokens no step accepts: every step commits one."""

    name = "always-wrong"

    def propose(self, tokens, max_tokens):
        return [(tokens[-1] + 1 + i) % 50 for i in range(min(max_tokens, 2))]


def _lookup_is_the_oracle(model, monkeypatch, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Plain decoding's tokens for ``prompt``; from now on the runner's ``prompt-lookup`` drafts them (:class:`_Oracle`)
    and every other drafter drafts what no step accepts (:class:`_Wrong`)."""
    import leap.search.runner as runner_module

    plain = SelfSpecDecoder(model, None).generate(prompt, max_new_tokens=max_new_tokens).token_ids
    _Oracle.reference = plain + [0] * 8
    monkeypatch.setattr(runner_module, "make_drafter",
                        lambda name, **kwargs: _Oracle() if name == "prompt-lookup" else _Wrong())
    return plain


class _Script(SearchAgent):
    """Asks the oracle first, then the wrong drafter: the test does not depend on an agent's choices."""

    def __init__(self, num_layers: int) -> None:
        super().__init__(JointSpace(baseline_space(num_layers), ["prompt-lookup", "suffix"]))
        self.good, self.bad = (DraftChoice(option, None) for option in self.space.options)

    def ask(self, history):
        return self.good if not len(history) else self.bad


class _BestIsWorst(_Script):
    """Asks the oracle, then the wrong drafter; names the wrong one its best (as LEAP's MCTS names a trial in its ratio
    band over a faster one outside it)."""

    def best(self, history):
        return self.bad


def test_a_request_the_memory_settled_fixes_its_leader_where_the_agents_best_does_not_pay(tiny_qwen2, monkeypatch):
    """The memory settles a request on its leader; where the agent's best is below ``min_speedup``, the leader's best
    trial is fixed, not plain decoding (red when _choose ignores the settle: docs/data/regret-7212270/long-t0, 484)."""
    from leap.search.memory import SearchMemory
    from tests.costs import fake_costs

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 40)
    # the test's costs, not this machine's calibration: a verification costs 1.05 to 1.1 plain steps, so the wrong
    # drafter's step (one token) is below 1 and the oracle's (three) above
    costs = fake_costs(tiny_qwen2.num_layers)
    settings = SearchSettings(budget=10, steps_per_trial=2, give_up=0, reward="cost", abandon=0.0)
    out = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None, costs=costs), lambda trace: _BestIsWorst(tiny_qwen2.num_layers),
                       settings, memory=SearchMemory(None)).generate(prompt, max_new_tokens=40)
    rewards = {t["config"]: t["reward"] for t in out.trials}
    assert rewards["suffix"] < settings.min_speedup <= rewards["prompt-lookup"]
    assert out.stop == "memory" and out.fixed_config == "prompt-lookup" and out.generation.token_ids == plain


@pytest.mark.parametrize("abandon", [0.5, 0.0])
def test_a_trial_far_below_the_leader_is_abandoned_at_its_half(tiny_qwen2, monkeypatch, abandon):
    """With ``abandon``, a trial whose first half measured below half the best other option's reward stops there: the
    wrong drafter's trials run two of their four steps (red when _trial ignores the bar); with 0 every trial runs whole.
    The cost-model reward keeps the rewards deterministic; the output stays plain decoding's."""
    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 60)
    settings = SearchSettings(budget=3, steps_per_trial=4, give_up=0, min_speedup=0.0, reward="cost", abandon=abandon)
    out = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _Script(tiny_qwen2.num_layers),
                       settings).generate(prompt, max_new_tokens=60)
    assert out.generation.token_ids == plain
    good, *bad = out.trials
    assert good["config"] == "prompt-lookup" and good["committed"] == 12  # the leader's trial runs whole
    assert [t["committed"] for t in bad] == ([2, 2] if abandon else [4, 4])


class _AlwaysPromptLookup(SearchAgent):
    """Proposes and fixes prompt lookup, so the test does not depend on an agent's choices."""

    def __init__(self, num_layers: int) -> None:
        super().__init__(JointSpace(baseline_space(num_layers), ["prompt-lookup"]))
        self.choice = DraftChoice(parse_option("prompt-lookup"), None)

    def ask(self, history):
        return self.choice


def test_carry_over_reuses_a_choice_that_paid_then_searches_again(tiny_qwen2):
    searched = []

    def factory(trace):
        searched.append(trace)
        return _AlwaysPromptLookup(tiny_qwen2.num_layers)

    # no EOS (Qwen2 tiny model) and 40 tokens: every prompt has a fixed phase; with min_speedup 0 it "pays"
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0))
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [4, 4, 5, 4, 4], [7, 8, 9, 7, 8]]
    outs = [runner.generate(p, max_new_tokens=40) for p in prompts]
    assert [o.carried_over for o in outs] == [False, True, True, False]
    assert [o.iterations for o in outs] == [3, 0, 0, 3]
    assert len(searched) == 2  # a carried request builds no space and no agent: only the two searches did
    # ... and runs no plain steps to time t_base: it reuses the last one measured (red when it measures its own)
    assert outs[1].t_base_s == outs[2].t_base_s == outs[0].t_base_s != outs[3].t_base_s
    assert all(o.fixed_config == "prompt-lookup" for o in outs)
    plain = SelfSpecDecoder(tiny_qwen2, None)
    assert all(o.generation.token_ids == plain.generate(p, max_new_tokens=40).token_ids for o, p in zip(outs, prompts))
    # a choice whose fixed phase does not reach min_speedup is never carried
    strict = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=1e9))
    assert not any(strict.generate(p, max_new_tokens=40).carried_over for p in prompts[:3])


@pytest.mark.parametrize("here", [True, False])
def test_a_choice_far_below_what_the_memory_knows_is_not_carried(tiny_qwen2, here):
    """With a memory, a carried choice must reach ``keep`` times the best option earlier requests measured, not only
    ``min_speedup`` (docs/data/handoff: prompt lookup fixed by one short search was carried over seven prompts at
    ~1.2x where lowbit gave ~2.4x; red when _carry ignores the memory). A mean only the shipped prior knows (``last``
    0: another machine's) does not end the carry (red when it does: docs/data/regret-xeon-186fde1/long-t0, 242)."""
    from leap.search.memory import SearchMemory

    memory = SearchMemory(None)
    memory.stats = {"lowbit": {"requests": 5, "mean": 1e6, "last": 1 if here else 0}}
    factory = lambda trace: _AlwaysPromptLookup(tiny_qwen2.num_layers)  # noqa: E731
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0), memory=memory)
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [4, 4, 5, 4, 4]]
    carried = [runner.generate(p, max_new_tokens=40).carried_over for p in prompts]
    assert carried == ([False, False, False] if here else [False, True, True])
    assert memory.best_expected() == 1e6  # (without the memory the same runs carry: the test above)


def _lucky_trials(oracle: float, wrong: float) -> type:
    """A measured reward whose trials are scripted: the oracle's (accepting steps) ``oracle``, the wrong drafter's
    ``wrong``; a fixed phase is still timed for real (``OnlineSearch._carry``)."""
    from leap.search.reward import MeasuredSpeedup

    class Scripted(MeasuredSpeedup):
        def trial(self, steps):
            return oracle if any(x.accepted for x in steps) else wrong

    return Scripted


@pytest.mark.parametrize("wrong, proven, carried", [(1e3, None, False), (1e-3, None, True), (1e3, "here", True),
                                                     (1e3, "prior", False), (1e3, "prior and once here", False)])
def test_a_choice_the_memory_does_not_count_is_carried_once_its_fixed_phase_beat_every_rival_trial(
        tiny_qwen2, monkeypatch, wrong, proven, carried):
    """The oracle's lucky trial (1e6) fixes it; its fixed phase, timed for real (a few times plain), ran below the
    wrong drafter's trial (1e3) on the same request, so a memory that does not yet count the oracle does not carry it
    (red when _carry ignores the rival: from an empty memory a lucky ``suffix`` trial was carried over eight long
    requests at 0.84 of ``lowbit``, docs/data/regret-xeon-186fde1/long-t0). It is carried where its fixed phase beat the
    rival (1e-3), and where this machine measured it on two requests already; not where only the shipped prior, or the
    prior and one request here, vouch for it (red when any counted mean exempts it: a lucky ``gated`` was carried at
    0.79 of ``lowbit``, docs/data/regret-amd-e75bfc1/long-t0, 488-490)."""
    import leap.search.runner as runner_module
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 40)
    monkeypatch.setattr(runner_module, "MeasuredSpeedup", _lucky_trials(1e6, wrong))
    memory = SearchMemory(None)
    here = {None: None, "here": 2, "prior": 0, "prior and once here": 1}[proven]
    if here is not None:  # the prior's entries: "last" 0, "here" 0 (SearchMemory.start_from_prior)
        memory.stats = {"prompt-lookup": {"requests": 2 + (proven == "prior and once here"), "mean": 2.0,
                                          "here": here, "last": 1 if here else 0}}
    settings = SearchSettings(budget=2, give_up=0, carry_over=2, abandon=0.0, favourite_first=False, min_speedup=0.0)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _Script(tiny_qwen2.num_layers), settings,
                          memory=memory)
    first = runner.generate(prompt, max_new_tokens=40)
    assert [t["config"] for t in first.trials] == ["prompt-lookup", "suffix"] and first.fixed_config == "prompt-lookup"
    assert first.generation.token_ids == plain
    assert first.carry == ("carried" if carried else "not carried: below a rival trial")  # the record says why
    assert first.to_dict()["search_carry"] == first.carry
    assert runner.generate(prompt, max_new_tokens=40).carried_over is carried


class _ScriptTakesHanded(_Script):
    """:class:`_Script` (the oracle, then the wrong drafter) that takes the runner's first trial."""

    accepts_foreign_trials = True


def test_the_next_search_first_tries_the_option_the_memory_remembers_best_though_measured_once(tiny_qwen2,
                                                                                                monkeypatch):
    """From an empty memory, the oracle led by a lucky trial (1e6) but its fixed phase ran below the wrong drafter's
    trial (1e3): the memory holds the fixed phase for the oracle, so the wrong drafter, measured on one request, is the
    next request's first trial (red when the favourite counts only options measured on ``min_requests`` requests: the
    last request's leader, the oracle, is tried first). Lossless."""
    import leap.search.runner as runner_module
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 40)
    monkeypatch.setattr(runner_module, "MeasuredSpeedup", _lucky_trials(1e6, 1e3))
    settings = SearchSettings(budget=2, give_up=0, carry_over=2, abandon=0.0, min_speedup=0.0)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _ScriptTakesHanded(tiny_qwen2.num_layers),
                          settings, memory=SearchMemory(None))
    first = runner.generate(prompt, max_new_tokens=40)
    assert [t["config"] for t in first.trials] == ["prompt-lookup", "suffix"] and first.fixed_config == "prompt-lookup"
    second = runner.generate(prompt, max_new_tokens=40)
    assert second.trials[0]["config"] == "suffix" and second.generation.token_ids == plain


@pytest.mark.parametrize("challenger, carried", [(1e6, [False, True, False]), (1e-9, [False, True, True])])
def test_a_carried_choice_is_dropped_once_an_option_measured_on_one_request_is_remembered_above_it(tiny_qwen2,
                                                                                                challenger, carried):
    """Prompt lookup, carried, is dropped after its second request once ``suffix``, measured here on one request, is
    remembered above it (1e6), so the third request searches (red when _carry ignores options not yet measured on
    ``min_requests`` requests: a long-prompt run carried a lucky ``suffix`` over eight requests at 0.84 of ``lowbit``,
    docs/data/regret-xeon-186fde1/long-t0); remembered below it (1e-9), the carry goes on."""
    from leap.search.memory import SearchMemory

    memory = SearchMemory(None)
    memory.stats = {"prompt-lookup": {"requests": 5, "mean": 1e-6}, "suffix": {"requests": 1, "mean": challenger}}
    factory = lambda trace: _AlwaysPromptLookup(tiny_qwen2.num_layers)  # noqa: E731
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0), memory=memory)
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [4, 4, 5, 4, 4]]
    outcomes = [runner.generate(p, max_new_tokens=40) for p in prompts]
    assert [o.carried_over for o in outcomes] == carried
    assert outcomes[1].carry == ("dropped: an option remembered above it" if challenger > 1 else "kept")


def test_a_choice_the_memory_ranks_best_is_carried_on_a_slower_prompt(tiny_qwen2):
    """A carried choice is judged by its own remembered mean against the best option's, not by one request's speed
    against a mean over other prompts: prompt lookup, the memory's best option by far, stays carried although this
    request's measurement is nowhere near that mean (red when _carry compares the request's speed with the bar:
    docs/data/lowbit_dense searched 24 of 39 requests)."""
    from leap.search.memory import SearchMemory

    memory = SearchMemory(None)
    memory.stats = {"prompt-lookup": {"requests": 5, "mean": 1e6}, "suffix": {"requests": 5, "mean": 1.0}}
    searched = []

    def factory(trace):
        searched.append(trace)
        return _AlwaysPromptLookup(tiny_qwen2.num_layers)

    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0), memory=memory)
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [4, 4, 5, 4, 4]]
    assert [runner.generate(p, max_new_tokens=40).carried_over for p in prompts] == [False, True, True]
    assert len(searched) == 1


@pytest.mark.parametrize("remembered, renewed", [(1e-6, True), (1e6, False)])
def test_a_carried_choice_that_holds_up_is_carried_again(tiny_qwen2, remembered, renewed):
    """carry_renew: a carried request that runs at least ``keep`` times its option's remembered mean starts the
    carry_over count again (searching again every fifth request was most of what the search lost to lowbit:
    docs/data/search_prior); one that falls below it counts down as before (red when carry_renew does nothing, or
    renews whatever the request measured)."""
    from leap.search.memory import SearchMemory

    memory = SearchMemory(None)
    memory.stats = {"prompt-lookup": {"requests": 5, "mean": remembered}}
    searched = []

    def factory(trace):
        searched.append(trace)
        return _AlwaysPromptLookup(tiny_qwen2.num_layers)

    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0, carry_renew=True),
                          memory=memory)
    prompts = [[5, 6, 7, 8] * 3, [9, 10, 9, 10, 9], [4, 4, 5, 4, 4], [7, 8, 9, 7, 8], [6, 5, 6, 5, 6]]
    carried = [runner.generate(p, max_new_tokens=40).carried_over for p in prompts]
    assert carried == ([False, True, True, True, True] if renewed else [False, True, True, False, True])
    assert len(searched) == (1 if renewed else 2)


def test_a_choice_carried_on_short_prompts_is_not_carried_to_a_long_one(tiny_qwen2):
    """Each of the memory's conditions keeps its own carry: a long prompt after a short prompt's carried choice is
    searched, and the short prompt after it takes up the short prompts' carry with their own plain step time (red when
    one carry serves both conditions: the long request is carried, or the short one after it is searched again)."""
    from leap.search.memory import SearchMemory

    searched = []

    def factory(trace):
        searched.append(trace)
        return _AlwaysPromptLookup(tiny_qwen2.num_layers)

    memory = SearchMemory(None, long_prompt=10)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=3, carry_over=2, give_up=0, min_speedup=0.0), memory=memory)
    short, long_, short_again = [5, 6, 7, 8, 5], [9, 10, 9, 10, 9] * 3, [4, 4, 5, 4, 4]
    outs = [runner.generate(p, max_new_tokens=40) for p in (short, long_, short_again)]
    assert [o.carried_over for o in outs] == [False, False, True] and len(searched) == 2
    assert outs[2].t_base_s == outs[0].t_base_s != outs[1].t_base_s
    plain = SelfSpecDecoder(tiny_qwen2, None)
    assert all(o.generation.token_ids == plain.generate(p, max_new_tokens=40).token_ids
               for o, p in zip(outs, (short, long_, short_again)))


def test_a_request_that_ends_inside_its_search_carries_its_best_trial(tiny_qwen2):
    """A request whose prompt ends while the search still runs has no fixed phase; its best option's trials stand
    for it, so the next request carries that choice instead of searching again (red when only a fixed phase counts:
    docs/data/search_carry searched six requests in a row to their ends)."""
    factory = lambda trace: _AlwaysPromptLookup(tiny_qwen2.num_layers)  # noqa: E731
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=50, carry_over=2, give_up=0, min_speedup=0.0))
    first = runner.generate([5, 6, 7, 8] * 3, max_new_tokens=16)
    assert first.stop == "done" and first.iterations >= 2
    second = runner.generate([9, 10, 9, 10, 9], max_new_tokens=8)
    assert second.carried_over and second.fixed_config == "prompt-lookup"


def test_one_lucky_trial_does_not_carry(tiny_qwen2):
    """A request that ends after a single trial of its best option carries nothing: one few-step trial is one sample
    (docs/data/xeon_rebaseline: gated fixed on one trial rewarded 8.4 and carried on at 0.62 of lowbit; red when
    _carry takes one trial's mean)."""
    from leap.search.runner import MIN_CARRY_TRIALS

    factory = lambda trace: _AlwaysPromptLookup(tiny_qwen2.num_layers)  # noqa: E731
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), factory,
                          SearchSettings(budget=1, carry_over=2, give_up=0, min_speedup=0.0, steps_per_trial=64))
    first = runner.generate([5, 6, 7, 8] * 3, max_new_tokens=12)
    assert first.stop == "done" and first.iterations == 1 < MIN_CARRY_TRIALS
    assert not runner.generate([9, 10, 9, 10, 9], max_new_tokens=8).carried_over


def test_a_drafters_one_time_loading_does_not_count_as_the_spaces_cost(tiny_qwen2, monkeypatch):
    """The space's remembered cost leaves out what a drafter's first use costs (loading weights, a head):
    it does not recur, so it must not make the next request skip the search. A first search that found
    nothing, slowed only by such loading, is followed by a search on the next request."""
    import leap.search.runner as runner_module
    from leap.core.drafters.prompt_lookup import PromptLookup

    class SlowFirstUse(PromptLookup):
        needs_model = True

        def use_model(self, model):
            if not getattr(self, "loaded", False):
                time.sleep(0.5)  # far beyond what the request may lose
                self.loaded = True

    monkeypatch.setattr(runner_module, "make_drafter", lambda name, **kwargs: SlowFirstUse())
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _AlwaysPromptLookup(tiny_qwen2.num_layers),
                          SearchSettings(budget=2, give_up=0, min_speedup=100.0, loss_budget=0.5))
    first = runner.generate([5, 6, 7, 8] * 3, max_new_tokens=40)
    assert first.iterations >= 1 and first.fixed_config is None and first.search_overhead_s >= 0.5
    second = runner.generate([9, 10, 9, 10, 9], max_new_tokens=40)
    assert second.iterations >= 1, second.stop


class _WrongFirst(_Script):
    """Asks the wrong drafter for its first two trials of each request, then the oracle; takes the runner's first
    trial."""

    accepts_foreign_trials = True

    def ask(self, history):
        return self.bad if sum(t.config == self.bad for t in history) < 2 else self.good


@pytest.mark.parametrize("favourite_first", [True, False])
def test_a_leader_that_carried_nothing_is_the_next_requests_first_trial(tiny_qwen2, monkeypatch, favourite_first):
    """A request that ends inside its search with its leader tried once hands it to the next request, which tries it
    first and carries it once that trial confirms it (the earlier trial counts towards ``MIN_CARRY_TRIALS``). Red when
    the leader is not handed on: the second request starts with the agent's draw and the third searches again. Without
    ``favourite_first`` the agent draws every first trial."""
    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 17)
    settings = SearchSettings(budget=50, steps_per_trial=4, give_up=0, min_speedup=0.0, reward="cost", carry_over=2,
                              favourite_first=favourite_first)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _WrongFirst(tiny_qwen2.num_layers), settings)
    first = runner.generate(prompt, max_new_tokens=17)
    assert first.stop == "done" and [t["config"] for t in first.trials] == ["suffix", "suffix", "prompt-lookup"]
    second = runner.generate(prompt, max_new_tokens=17)
    assert second.generation.token_ids == plain
    assert (second.trials[0]["config"] == "prompt-lookup") is favourite_first
    assert runner.generate(prompt, max_new_tokens=17).carried_over is favourite_first


class _ThreeOptions(SearchAgent):
    """Asks the wrong drafter (suffix) once, then the oracle; never the third option (stand)."""

    accepts_foreign_trials = True

    def __init__(self, num_layers: int) -> None:
        super().__init__(JointSpace(baseline_space(num_layers), ["prompt-lookup", "suffix", "stand"]))
        self.good, self.bad, _ = (DraftChoice(option, None) for option in self.space.options)

    def ask(self, history):
        return self.bad if not any(t.config == self.bad for t in history) else self.good


def test_a_handed_leader_that_leads_again_settles_the_request_after_one_more_option(tiny_qwen2, monkeypatch):
    """From an empty memory, the second request tries the first's leader first; once it leads again and one more
    option has been tried, the request settles (stop = "memory") though a third option is still unknown, instead of
    waiting until every option is known on two requests (red when the runner does not hand the leader to the memory's
    settling: the unknown option holds the search to the request's end)."""
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 33)
    settings = SearchSettings(budget=50, steps_per_trial=4, give_up=0, min_speedup=0.0, reward="cost", carry_over=0)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _ThreeOptions(tiny_qwen2.num_layers),
                          settings, memory=SearchMemory(None))
    first = runner.generate(prompt, max_new_tokens=17)
    assert first.stop == "done" and [t["config"] for t in first.trials][:2] == ["suffix", "prompt-lookup"]
    second = runner.generate(prompt, max_new_tokens=33)
    assert [t["config"] for t in second.trials] == ["prompt-lookup", "suffix"] and second.stop == "memory"
    assert second.generation.token_ids == plain


class _AsksStand(_ThreeOptions):
    """Always asks ``stand`` (a wrong drafter); takes the runner's trials."""

    def ask(self, history):
        return DraftChoice(self.space.options[2], None)


@pytest.mark.parametrize("favourite_first", [True, False])
def test_after_a_favourite_falls_short_the_best_remembered_option_that_could_still_win_is_tried_next(
        tiny_qwen2, monkeypatch, favourite_first):
    """The favourite ``suffix`` (remembered at 100, a wrong drafter here) falls short; the untried options remembered
    above its trial hold the request, and the best of them, ``prompt-lookup`` (50, the oracle), is the next trial,
    not the agent's draw (``stand``, remembered at 1.0), so the request settles after two trials (red when the agent
    draws: ``stand`` every time, and ``prompt-lookup`` holds the request to its end). Without ``favourite_first`` the
    agent draws every trial. Lossless."""
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 40)
    memory = SearchMemory(None)
    memory.stats = {"suffix": {"requests": 3, "mean": 100.0}, "prompt-lookup": {"requests": 3, "mean": 50.0},
                    "stand": {"requests": 3, "mean": 1.0}}
    settings = SearchSettings(budget=6, give_up=0, reward="cost", abandon=0.0, favourite_first=favourite_first)
    out = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _AsksStand(tiny_qwen2.num_layers), settings,
                       memory=memory).generate(prompt, max_new_tokens=40)
    tried = [t["config"] for t in out.trials]
    if favourite_first:
        assert tried == ["suffix", "prompt-lookup"] and out.stop == "memory" and out.fixed_config == "prompt-lookup"
    else:
        assert set(tried) == {"stand"}
    assert out.generation.token_ids == plain


@pytest.mark.parametrize("explore", [2, 0])
def test_a_request_stops_waiting_for_unknown_options_once_it_has_tried_explore_of_them(tiny_qwen2, monkeypatch,
                                                                                         explore):
    """From an empty memory, nothing handed, a request settles (stop = "memory") once its leader pays and it has tried
    ``explore`` options, though a third is still unknown (red when the runner does not pass ``explore`` to the memory:
    the unknown option holds the search to the request's end); with ``explore=0`` it does hold it. Lossless either
    way."""
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 33)
    settings = SearchSettings(budget=50, steps_per_trial=4, give_up=0, min_speedup=0.0, reward="cost", carry_over=0,
                              explore=explore)
    runner = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _ThreeOptions(tiny_qwen2.num_layers),
                          settings, memory=SearchMemory(None))
    out = runner.generate(prompt, max_new_tokens=33)
    assert [t["config"] for t in out.trials][:2] == ["suffix", "prompt-lookup"]
    assert (out.stop, out.iterations) == ("memory", 2) if explore else out.stop == "done"
    assert out.generation.token_ids == plain
    with pytest.raises(SettingsError, match="explore"):
        SearchSettings(explore=-1)


@pytest.mark.parametrize("favourite_first", [True, False])
def test_a_search_does_not_open_with_an_option_the_memory_remembers_losing(tiny_qwen2, monkeypatch, favourite_first):
    """The memory knows ``stand`` alone, remembered losing (0.2 of plain decoding): the first trial is the first
    option it does not know yet (``prompt-lookup``), not ``stand`` (red when the favourite ignores ``min_speedup``:
    on one H200 every search opened with ``eagle``, 0.01-0.53, tripped the loss budget and ended there,
    experiments/2026-11-28-gpu-regret). Without ``favourite_first`` the agent draws (``stand``). Lossless."""
    from leap.search.memory import SearchMemory

    prompt = [5, 6, 7, 8] * 3
    plain = _lookup_is_the_oracle(tiny_qwen2, monkeypatch, prompt, 24)
    memory = SearchMemory(None)
    memory.stats = {"stand": {"requests": 5, "mean": 0.2}}
    assert memory.remembered("stand") == 0.2
    settings = SearchSettings(budget=1, steps_per_trial=4, give_up=0, reward="cost", carry_over=0,
                              favourite_first=favourite_first)
    out = OnlineSearch(SelfSpecDecoder(tiny_qwen2, None), lambda trace: _AsksStand(tiny_qwen2.num_layers), settings,
                       memory=memory).generate(prompt, max_new_tokens=24)
    assert out.trials[0]["config"] == ("prompt-lookup" if favourite_first else "stand")
    assert out.generation.token_ids == plain
