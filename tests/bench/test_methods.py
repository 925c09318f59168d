"""Every benchmark method name (bench methods, agents, drafters, peers) runs and is lossless (greedy)."""

from __future__ import annotations

import pytest

from leap.bench.methods import MethodResult, make_method, method_names
from leap.core.errors import SettingsError, UnknownNameError

PROMPT = [5, 6, 7, 5, 6, 7, 5, 6]


@pytest.fixture(scope="module")
def plain_ids(tiny_llama):
    return make_method("ar", tiny_llama).run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0).token_ids


KWARGS = {"layer-skip": {"config": "skip=2"}, "hybrid": {"config": "skip=2-3", "free": "prompt-lookup"}}


@pytest.mark.parametrize("name", method_names())
def test_every_method_matches_plain_decoding(name, tiny_llama, plain_ids):
    from leap.core.drafters import drafters

    example = dict(drafters.get(name).example_kwargs) if name in drafters else {}
    res = make_method(name, tiny_llama, **{**example, **KWARGS.get(name, {})}).run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0)
    assert isinstance(res, MethodResult)
    assert res.token_ids == plain_ids
    assert 1 <= res.steps <= len(res.token_ids)
    assert set(res.parts) <= {"prefill_s", "decode_s", "search_overhead_s"} and all(v >= 0 for v in res.parts.values())


def test_tree_verify_reaches_the_decoder(tiny_llama):
    from leap.bench.methods import BenchOptions

    method = make_method("stand", tiny_llama, BenchOptions(tree_verify="traversal"), shape="opt")
    assert method.decoder.tree_rule.name == "traversal"
    assert make_method("stand", tiny_llama, tree_verify="traversal").decoder.tree_rule.name == "traversal"
    assert make_method("stand", tiny_llama).decoder.tree_rule.name == "match"


def test_unknown_method_lists_the_names(tiny_llama):
    with pytest.raises(UnknownNameError, match="known: .*hf-pld"):
        make_method("nope", tiny_llama)


def test_peer_settings_are_checked(tiny_llama):
    with pytest.raises(SettingsError, match="layer must be"):
        make_method("hf-early-exit", tiny_llama, layer=99)


def test_a_search_memory_built_elsewhere_is_read_named_and_kept_apart(tiny_llama, tmp_path):
    """memory=FILE.json: a memory built on other prompts (experiments/2026-11-25-search-warm/search_warm.sh) starts the run, the records
    say which file, and what the run learns is written there, never to $LEAP_CACHE; other values are refused."""
    import json

    from leap.search.memory import SearchMemory

    path = tmp_path / "warm.json"
    warm = SearchMemory(path)
    warm.observe({"suffix": 1.4, "prompt-lookup": 1.1}, "suffix", 1.5)
    kwargs = dict(drafters="suffix;prompt-lookup", steps_per_trial=2)
    method = make_method("leap-drafters", tiny_llama, memory=str(path), **kwargs)
    assert method.memory.stats == warm.stats and str(path) in method.memory_at_start
    res = method.run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0)
    assert res.extra["search_memory_at_start"] == method.memory_at_start
    assert res.extra["search_carry"].split(":")[0] in {"carried", "renewed", "kept", "not carried", "dropped"}
    before = sum(v["requests"] for v in warm.stats.values())
    after = sum(v["requests"] for v in json.loads(path.read_text())["options"].values())
    assert after > before  # what the run's request measured was added to the file
    with pytest.raises(SettingsError, match="FILE.json"):
        make_method("leap-drafters", tiny_llama, memory="warm.txt", **kwargs)


def test_the_memorys_conditions_are_ablation_flags(tiny_llama):
    """``memory_long_prompt=0``, ``memory_sampled=false`` and ``memory_rescale=false`` (``--method-arg``) reach the
    memory: one set for every prompt length and temperature, a prior kept at its scale (red when the method drops
    them)."""
    kwargs = dict(drafters="suffix;prompt-lookup", steps_per_trial=2)
    default = make_method("leap-drafters", tiny_llama, **kwargs).memory
    assert default.condition(5000, temperature=1.0) == "sampled-long"
    one = make_method("leap-drafters", tiny_llama, memory_long_prompt=0, memory_sampled=False, **kwargs).memory
    assert one.condition(5000, temperature=1.0) == "short"
    assert default.rescale and default.copy().rescale  # the prior's rescaling: ``memory_rescale=false``, the ablation
    assert not make_method("leap-drafters", tiny_llama, memory_rescale=False, **kwargs).memory.rescale


@pytest.mark.parametrize("name, ablation", [("explore", 0), ("kin", False), ("steady", False)])
def test_explore_and_kin_reach_the_search_settings(tiny_llama, name, ablation):
    """``explore`` and ``kin`` (``--method-arg leap-drafters:explore=0``, ``kin=false``: the ablations) reach the
    runner's settings; the defaults are the settings' (red when the method drops either)."""
    from leap.search.runner import SearchSettings

    kwargs = dict(drafters="suffix;prompt-lookup", steps_per_trial=2)
    default = getattr(make_method("leap-drafters", tiny_llama, **kwargs).runner.settings, name)
    assert default == getattr(SearchSettings(), name) and default != ablation
    assert getattr(make_method("leap-drafters", tiny_llama, **{name: ablation}, **kwargs).runner.settings, name) == ablation


def test_memory_first_makes_every_request_a_new_machines_first(tiny_llama, tmp_path, monkeypatch):
    """memory=first: each request starts from the shipped prior with a new search (red when the memory or the runner
    of the first request is kept: the second would start from what the first learnt, or carry its choice)."""
    import json

    from leap.search.memory import store as memory_module

    monkeypatch.setattr(memory_module, "PRIOR_DIR", tmp_path)
    (tmp_path / f"{tiny_llama.name}.json").write_text(json.dumps(
        {"device_type": "cpu", "dtype": "float32", "options": {"suffix": {"requests": 5, "mean": 1.2}}}))
    method = make_method("leap-drafters", tiny_llama, memory="first", drafters="suffix;prompt-lookup",
                         steps_per_trial=2)
    seen = []
    for _ in range(2):
        method.run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0)
        seen.append((method.runner, method.memory, method.memory.requests))
    (first, first_memory, _), (second, second_memory, requests) = seen
    assert second is not first and second_memory is not first_memory and requests == 1  # its own request alone
    assert second_memory.prior is not None
    with pytest.raises(SettingsError, match="first"):
        make_method("leap-drafters", tiny_llama, memory="firstly", drafters="suffix")


def test_memory_prior_without_a_shipped_prior_for_the_device_says_it_starts_empty(tiny_llama, tmp_path, monkeypatch,
                                                                                  capsys):
    """memory=prior where leap ships no prior for the model on this device and dtype (a CUDA bfloat16 run: the shipped
    priors are CPU float32) says so on stderr: its records would otherwise read as a prior's run (red when silent);
    with a prior for the device it is silent."""
    import json

    from leap.search.memory import store as memory_module

    monkeypatch.setattr(memory_module, "PRIOR_DIR", tmp_path)
    make_method("leap-drafters", tiny_llama, memory="prior", drafters="suffix")
    assert "ships no search prior" in capsys.readouterr().err
    (tmp_path / f"{tiny_llama.name}.json").write_text(json.dumps(
        {"device_type": "cpu", "dtype": "float32", "options": {"suffix": {"requests": 5, "mean": 1.2}}}))
    method = make_method("leap-drafters", tiny_llama, memory="prior", drafters="suffix")
    assert method.memory.prior is not None and "ships no search prior" not in capsys.readouterr().err


@pytest.mark.parametrize("agent", ["ucb", "random", "optuna-tpe"])
def test_the_drafter_search_runs_any_registered_agent_and_stays_lossless(tiny_llama, agent):
    """leap-drafters' agent=NAME (issue 34's agent sweep on the drafter space): the named agent searches the joint
    space, and greedy output stays identical to plain decoding."""
    from leap.core import SelfSpecDecoder
    from leap.search.base import make_agent

    method = make_method("leap-drafters", tiny_llama, agent=agent, drafters="suffix;prompt-lookup", steps_per_trial=2)
    res = method.run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0)
    assert res.token_ids == SelfSpecDecoder(tiny_llama, None).generate(PROMPT, max_new_tokens=16).token_ids
    assert type(method.runner.agent).__name__ == type(make_agent(agent, method.runner.agent.space)).__name__


def test_hf_ar_with_stock_linears_runs_no_onednn_layer():
    from leap.core import SelfSpecDecoder
    from leap.core.modeling.fast_linear import OneDNNLinear
    from leap.core.modeling.model import wrap_model
    from tests.tiny import tiny_hf_model, tiny_tokenizer

    packed = wrap_model(tiny_hf_model("llama"), tiny_tokenizer(), fast_linear=True)  # packed whatever this CPU prefers
    plain_ids = SelfSpecDecoder(packed, None).generate(PROMPT, max_new_tokens=16).token_ids
    calls = []
    hooks = [m.register_forward_hook(lambda *a: calls.append(1)) for m in packed.hf_model.modules()
             if isinstance(m, OneDNNLinear)]
    try:
        if not hooks:
            pytest.skip("torch built without oneDNN: the model has no OneDNNLinear to swap out")
        res = make_method("hf-ar", packed, linears="stock").run(PROMPT, max_new_tokens=16, temperature=0.0, seed=0)
        assert res.token_ids == plain_ids and calls == [] and "linears=stock" in res.config
        make_method("hf-ar", packed).run(PROMPT, max_new_tokens=4, temperature=0.0, seed=0)
        assert calls  # the default runs leap's layers
    finally:
        for h in hooks:
            h.remove()
    with pytest.raises(SettingsError, match="linears"):
        make_method("hf-ar", packed, linears="mkl")


def _batchable():
    from leap.core.decoding.batch import batch_refusal
    from leap.core.drafters import drafters

    return [n for n in drafters.names() if batch_refusal(drafters.get(n)) is None]


@pytest.mark.parametrize("name", ["ar", *_batchable(), "layer-skip"])
def test_every_method_that_decodes_batches_gives_each_row_its_plain_decoding(name, tiny_llama, plain_ids):
    """Every registered drafter without layers, and LEAP's layer draft with a configuration, decode batches (issue 37),
    row by row lossless; the rest refuse."""
    from leap.core.drafters import drafters

    example = dict(drafters.get(name).example_kwargs) if name in drafters else {}
    if name == "layer-skip":
        example = {"config": "skip=2;repeat=4"}
    other = [9, 4, 11]
    alone = make_method("ar", tiny_llama).run(other, max_new_tokens=16, temperature=0.0, seed=0).token_ids
    res = make_method(name, tiny_llama, **example).run_batch([PROMPT, other, PROMPT], max_new_tokens=16,
                                                              temperature=0.0, seed=0)
    assert res.extra["row_token_ids"] == [plain_ids, alone, plain_ids]
    assert res.token_ids == [*plain_ids, *alone, *plain_ids]


def test_methods_that_cannot_batch_say_so(tiny_llama):
    for name in ("leap", "layer-skip", "hf-pld"):  # hf-pld: transformers' assisted generation takes one sequence
        kwargs = {"config": "skip=2;low=3"} if name == "layer-skip" else {}  # low-precision layers do not batch
        with pytest.raises(SettingsError, match="one request at a time"):
            make_method(name, tiny_llama, **kwargs).run_batch([PROMPT], max_new_tokens=4, temperature=0.0, seed=0)


@pytest.mark.parametrize("name", ["hf-ar", "hf-static"])
def test_transformers_plain_peers_decode_each_row_of_a_batch_as_alone(tiny_llama, name):
    """``hf-ar`` and ``hf-static`` batch (``leap bench --batch-size B``, the baseline a GPU user has at B > 1): one
    left-padded ``generate``, each row's tokens what the row alone decodes, cut at its own EOS (the tiny model's EOS
    ends rows at different lengths; red without the attention mask, which tells a prompt's token 0 from padding, or
    the cut)."""
    from leap.core import SelfSpecDecoder
    from tests.tiny import tiny_model

    model = tiny_model("llama", eos_token_id=None)
    prompts = [PROMPT, [0, *PROMPT[:3]], [7, 8, 9, 10, 11, 12, 13]]  # a real token 0: the pad id, not padding
    free = make_method(name, model).run(prompts[0], max_new_tokens=24, temperature=0.0, seed=0).token_ids
    i = next(i for i in range(3, 24) if free[i] not in free[:i])  # a token first seen mid-way: the first row's EOS
    model.config.eos_token_id = model.hf_model.generation_config.eos_token_id = free[i]
    method = make_method(name, model)
    res = method.run_batch(prompts, max_new_tokens=24, temperature=0.0, seed=0)
    alone = [method.run(p, max_new_tokens=24, temperature=0.0, seed=0).token_ids for p in prompts]
    assert alone[0] == free[: i + 1] and len({len(row) for row in alone}) > 1
    assert alone[1] == SelfSpecDecoder(model, None).generate(prompts[1], max_new_tokens=24).token_ids  # 0 attended
    assert res.extra["row_token_ids"] == alone and res.token_ids == [t for row in alone for t in row]
    assert res.extra["row_new_tokens"] == [len(row) for row in alone]


def test_the_drafter_searchs_batch_flags_reach_its_batch_decoder(tiny_llama):
    """``--method-arg leap-drafters:batch_first_step=true`` (and ``batch_switching``, ``batch_screen``,
    ``batch_prune``, ``batch_refresh``, ``batch_rejoin``, ``batch_judge_all_in``, ``batch_kin_all_in``,
    ``batch_kin_confidence``, ``batch_kin_by_rows``, ``batch_reward``, ``batch_fresh_bar``) reach the batch search's decoder and its
    bandits; by default a switch is left unmeasured, only the best drafter drafts on, switching is off and plain is
    measured again every 32 steps (red when a flag is dropped on the way)."""
    kwargs = {"drafters": "prompt-lookup;suffix", "batch_caps": "0;2"}
    plain = make_method("leap-drafters", tiny_llama, **kwargs)
    plain.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert plain._batch.decoder.first_step_setup == "switch" and not plain._batch.decoder.switching
    assert plain._batch.decoder.policy(2).refresh == 32
    flagged = make_method("leap-drafters", tiny_llama, batch_first_step=True, batch_switching=True, batch_screen="best",
                          batch_refresh=0, **kwargs)
    flagged.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    decoder = flagged._batch.decoder
    assert decoder.first_step_setup and decoder.switching and decoder.bar == "best"
    assert decoder.policy(2).refresh == 0 and decoder.policy(1).refresh == 0  # a seeded row count's too
    fixed = make_method("lowbit", tiny_llama, batch_cap="auto", batch_refresh=7)  # a fixed drafter's bandit
    assert fixed.batch.refresh == 7 and fixed.batch.policy(2).refresh == 7
    assert plain._batch.prune == 1.0 and plain._batch.rejoin
    assert make_method("leap-drafters", tiny_llama, batch_prune=False, **kwargs)._batch_settings["prune"] is None
    assert plain._batch.decoder.judge_all_in and plain._batch.kin_all_in
    ablation = make_method("leap-drafters", tiny_llama, batch_rejoin=False, batch_judge_all_in=False,
                           batch_kin_all_in=False, **kwargs)
    ablation.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert not ablation._batch.rejoin and not ablation._batch.decoder.judge_all_in and not ablation._batch.kin_all_in
    sure = make_method("leap-drafters", tiny_llama, batch_judge_all_in=0.95, **kwargs)  # judged beyond noise
    sure.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert sure._batch.decoder.judge_all_in == 0.95 and plain._batch.decoder.judge_all_in is True
    assert plain._batch.kin_confidence == 0.95 and ablation._batch.kin_confidence == 0.95
    assert plain._batch.kin_by_rows and not make_method("leap-drafters", tiny_llama, batch_kin_by_rows=False,
                                                        **kwargs)._batch_settings["kin_by_rows"]
    for value, expected in ((False, None), (0.8, 0.8)):  # false: the point estimates decide kin
        kin = make_method("leap-drafters", tiny_llama, batch_kin_confidence=value, **kwargs)
        kin.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
        assert kin._batch.kin_confidence == expected
    assert plain._batch.decoder.reward == "mean" and fixed.batch.reward == "mean"
    laggard = make_method("leap-drafters", tiny_llama, batch_reward="progress", **kwargs)
    laggard.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert laggard._batch.decoder.reward == "progress"
    assert make_method("lowbit", tiny_llama, batch_cap="auto", batch_reward="progress").batch.reward == "progress"
    assert plain._batch.decoder.policy(2).fresh_bar and fixed.batch.policy(2).fresh_bar
    stale = make_method("leap-drafters", tiny_llama, batch_fresh_bar=False, **kwargs)
    stale.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert not stale._batch.decoder.policy(2).fresh_bar and not stale._batch.decoder.policy(1).fresh_bar
    assert not make_method("lowbit", tiny_llama, batch_cap="auto", batch_fresh_bar=False).batch.policy(2).fresh_bar


def test_the_searchs_caps_are_a_flag_and_a_fixed_drafters_bandit_keeps_its_own(tiny_llama):
    """The batch search's bandit drafts at caps 0, 2, 4, 8 and 16 by default, a fixed drafter's (``batch_cap=auto``)
    at 0, 2, 4 and 8, and ``batch_caps='0;2;4;8'`` gives the search the fixed drafter's (the ablation of
    experiments/2026-12-02-cap16: red when the flag is dropped on the way or a default drifts)."""
    search = make_method("leap-drafters", tiny_llama, drafters="prompt-lookup;suffix")
    search.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert sorted({cap for _, cap in search._batch.decoder.policy(2).caps}) == [0, 2, 4, 8, 16]
    assert sorted(make_method("lowbit", tiny_llama, batch_cap="auto").batch.policy(2).caps) == [0, 2, 4, 8]
    narrow = make_method("leap-drafters", tiny_llama, drafters="prompt-lookup;suffix", batch_caps="0;2;4;8")
    narrow.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
    assert sorted({cap for _, cap in narrow._batch.decoder.policy(2).caps}) == [0, 2, 4, 8]


def test_the_search_makes_its_bar_again_while_undecided_and_a_fixed_drafter_carries_it(tiny_llama):
    """The search makes a batch's bar again while its drafting has not led plain decoding by a fifth (``batch_bar=0.2``,
    leap.core.policies.batch_bar); a fixed drafter's bandit carries it unless told; ``true``, ``false`` and a margin
    reach the decoder as given. Red when the flag is dropped on the way, bool() turns a margin into True, or a default
    drifts."""
    for flag, search_on, fixed_on in (({}, 0.2, False), ({"batch_bar": True}, True, True),
                                      ({"batch_bar": False}, False, False), ({"batch_bar": 0.3}, 0.3, 0.3)):
        search = make_method("leap-drafters", tiny_llama, drafters="prompt-lookup;suffix", **flag)
        search.run_batch([PROMPT, PROMPT], max_new_tokens=4, temperature=0.0, seed=0)
        assert search._batch.decoder.batch_bar.on == search_on and type(search._batch.decoder.batch_bar.on) is type(
            search_on)
        fixed = make_method("suffix", tiny_llama, batch_cap="auto", **flag).batch.batch_bar.on
        assert fixed == fixed_on and type(fixed) is type(fixed_on)


@pytest.mark.parametrize("name, kwargs", [("lowbit", {"batch_cap": "auto"}),
                                          ("leap-drafters", {"drafters": "prompt-lookup;suffix",
                                                             "batch_caps": "0;2"})])
def test_a_batch_record_says_what_the_all_in_tally_judged_by(tiny_llama, name, kwargs):
    """A batch's record keeps every step's rows, tokens and seconds, the plain rate the decoder's all-in tally judged
    them by and the tally after the batch: recomputed from the record, the tally is the decoder's (so a run's records
    say why its loss budget ran). Red when a step field is dropped or the tally or rates are not the decoder's."""
    method = make_method(name, tiny_llama, **kwargs)
    decoder = method.batch if name == "lowbit" else None
    totals = [0.0, 0.0]
    for _ in range(2):  # the tally adds up over batches; the record's is the decoder's after each
        extra = method.run_batch([PROMPT, PROMPT[:5], PROMPT], max_new_tokens=12, temperature=0.0, seed=0).extra
        decoder = decoder if name == "lowbit" else method._batch.decoder
        steps = list(zip(extra["batch_caps"], extra["batch_step_rows"], extra["batch_step_committed"],
                         extra["batch_step_s"]))
        assert steps and len(steps) == len(extra["batch_caps"]) and all(s > 0 for *_, s in steps)
        assert all(w == 1 if not cap else 1 <= w <= 1 + cap  # its verification's width
                   for w, (cap, *_) in zip(extra["batch_step_width"], steps, strict=True))
        assert all(0 <= d <= s for d, (*_, s) in zip(extra["batch_step_draft_s"], steps, strict=True))
        assert set(extra["batch_plain_rate"]) == {str(rows) for _, rows, _, _ in steps}
        for cap, rows, committed, seconds in steps:
            rate = extra["batch_plain_rate"][str(rows)]
            if cap and rate:
                totals[0] += seconds
                totals[1] += committed / rows / rate
        assert extra["batch_tally"] == [decoder.tally.seconds, decoder.tally.plain_s]
        assert extra["batch_tally"] == pytest.approx(totals, rel=1e-9)
    assert totals[0] > 0  # drafting steps were judged: the check above compared something


def test_after_the_warm_up_the_search_loads_every_drafter_on_the_warm_up_batches(tiny_llama, monkeypatch):
    """``after_warm_up`` hands each temperature's warm-up batch to ``BatchSearch.warm`` (every drafter's rows made,
    untimed), before it forgets what the warm-up measured. Red when the call is dropped or given another batch."""
    from leap.search.batch import BatchSearch

    calls = []
    monkeypatch.setattr(BatchSearch, "warm", lambda self, batch, temperature=0.0, seed=0: calls.append(
        (batch, temperature)))
    method = make_method("leap-drafters", tiny_llama, drafters="prompt-lookup;suffix", batch_caps="0;2")
    for temperature in (0.0, 1.0):
        method.run_batch([PROMPT, PROMPT[:5]], max_new_tokens=4, temperature=temperature, seed=0)
    method.after_warm_up()
    assert calls == [([PROMPT, PROMPT[:5]], 0.0), ([PROMPT, PROMPT[:5]], 1.0)]
    assert not method._batch.decoder.policy(2).means()  # and then forgot


@pytest.mark.parametrize("memory", ["fresh", "prior"])
def test_after_the_warm_up_the_search_starts_from_the_memory_its_records_name(tiny_llama, memory):
    """What the untimed warm-up taught the search - its memory's means and clock, the batch bandit's arms, a
    single request's last plain step time - is forgotten by ``after_warm_up``; the records' "empty memory" or "the
    shipped prior" is then the state the first timed call starts from. Red when any of the three is kept."""
    method = make_method("leap-drafters", tiny_llama, drafters="prompt-lookup;suffix", batch_caps="0;2",
                         memory=memory)
    start = (method.memory.describe(), method.memory.requests, str(method.memory.sets))
    method.run_batch([PROMPT, PROMPT], max_new_tokens=8, temperature=0.0, seed=0)
    method.run(PROMPT, max_new_tokens=8, temperature=0.0, seed=0)
    assert method.memory.requests > start[1] and method._batch.decoder.policy(2).means()
    assert method.runner._state.t_base > 0
    method.runner._state.handed = object()  # a leader the warm-up would hand to the first timed request
    method.runner._enter("long")  # ... and one parked for the short prompts' condition
    method.runner._state.handed = object()
    method.after_warm_up()
    assert (method.memory.describe(), method.memory.requests, str(method.memory.sets)) == start
    assert not method._batch.decoder.policy(2).means() and method.runner._state.t_base == 0.0
    assert method.runner._state.handed is None
    method.runner._enter("short")
    assert method.runner._state.handed is None and method.runner._state.t_base == 0.0
    again = method.run_batch([PROMPT, PROMPT], max_new_tokens=8, temperature=0.0, seed=0)  # still decodes
    assert again.extra["row_new_tokens"]
