"""The low-bit self-draft (issue 22): its runners stay in step with the decoder's tokens, its drafts are
lossless (greedy identity is also covered by the registry-wide drafter test), and under sampling the
output follows the target distribution, with a negative control that must fail."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from leap.core import LayerConfig, SelfSpecDecoder
from leap.core.drafters import make_drafter
from leap.core.drafters.lowbit import LowBit
from leap.core.errors import SettingsError
from leap.core.modeling.low_bit import LowBitRunner, TorchInt8Runner, make_runner
from leap.core.verify.sampling import SamplingSettings
from tests.core.verify.test_sampling import NEGATIVE_N, _chi2_pvalue, _exact_three_token_distribution
from tests.tiny import tiny_model


@pytest.fixture(scope="module")
def runner_model():
    return tiny_model("llama", vocab=97, eos_token_id=None)


class FloatRunner(TorchInt8Runner):
    """The int8 runner's cache bookkeeping over an unquantised float32 copy: its logits do not depend on how tokens
    were grouped into feeds (dynamic int8 quantisation scales each fed group as a whole, so a real int8 copy fed
    ``[a, b]`` then ``[c]`` and one fed ``[a, b, c]`` differ by rounding), so tests of what the cache holds can
    compare exactly."""

    def __init__(self, model):
        import copy

        from leap.core.modeling.hf_interface import dynamic_cache

        LowBitRunner.__init__(self)
        self.n_ctx = int(model.max_context)
        self.module = copy.deepcopy(model.hf_model).float().eval()
        self._cache_type = dynamic_cache()
        self.cache = self._cache_type()


@pytest.mark.parametrize("fast_linear", [True, False])
def test_the_int8_runner_quantises_whatever_linears_the_model_runs(fast_linear):
    """Every linear of the runner's copy is a dynamically quantised int8 one, also when the model was loaded with leap's
    packed oneDNN linears (quantize_dynamic replaces nn.Linear only: such a copy used to stay float32)."""
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    from leap.core.modeling.fast_linear import OneDNNLinear, onednn_available
    from leap.core.modeling.model import wrap_model
    from tests.tiny import tiny_hf_model, tiny_tokenizer

    if fast_linear and not onednn_available():
        pytest.skip("torch built without oneDNN")
    model = wrap_model(tiny_hf_model("llama"), tiny_tokenizer(), fast_linear=fast_linear)
    modules = list(TorchInt8Runner(model).module.modules())
    assert sum(isinstance(m, Int8Linear) for m in modules) == 6 * 7 + 1  # 7 projections a layer and the LM head
    assert not any(isinstance(m, (OneDNNLinear, torch.nn.Linear)) for m in modules)


@settings(max_examples=20, deadline=None)
@given(contexts=st.lists(st.lists(st.integers(4, 96), min_size=1, max_size=12), min_size=2, max_size=5),
       shared=st.integers(0, 8))
def test_runner_sync_equals_a_fresh_run_whatever_came_before(runner_model, contexts, shared):
    """After any sequence of syncs (shared prefixes, rollbacks, extensions), the logits equal those of a
    fresh runner fed the same tokens: the cache holds exactly the synced prefix."""
    runner = FloatRunner(runner_model)
    prefix = contexts[0][:shared]
    for ctx in contexts:
        tokens = prefix + ctx
        got = runner.sync(tokens)
        assert runner.cached == tokens
        fresh = FloatRunner(runner_model).sync(tokens)
        assert torch.allclose(got, fresh, atol=1e-4), "stale cache entries leaked into the logits"


def test_runner_follows_the_full_model_closely(runner_model):
    """int8 weights change the numbers a little, not the model: top-1 agreement with the float model."""
    runner = make_runner(runner_model, backend="torch-int8")
    prompt = [5, 9, 14, 22, 31, 7, 8, 9]
    with torch.inference_mode():
        full = runner_model.hf_model(torch.tensor([prompt])).logits[0]
    agree = sum(int(runner.sync(prompt[: i + 1]).argmax()) == int(full[i].argmax()) for i in range(len(prompt)))
    assert agree >= len(prompt) - 1


@pytest.mark.parametrize("num_tokens, skip", [(1, ""), (4, ""), (6, "2,3")])
def test_lowbit_greedy_output_is_plain_greedy_output(tiny_llama, num_tokens, skip):
    plain = SelfSpecDecoder(tiny_llama, None).generate([5, 6, 7, 8], max_new_tokens=40)
    cfg = LayerConfig.from_sets(tiny_llama.num_layers, skip={int(s) for s in skip.split(",") if s})
    spec = SelfSpecDecoder(tiny_llama, cfg, drafter=LowBit(num_tokens=num_tokens)).generate([5, 6, 7, 8],
                                                                                             max_new_tokens=40)
    assert spec.token_ids == plain.token_ids
    assert sum(s.drafted for s in spec.steps) > 0
    # a close draft: most of its tokens are accepted on the tiny model (a wrong cache would not be)
    assert spec.acceptance_rate > 0.5


@pytest.mark.heavy
@pytest.mark.parametrize("top_k", [0])  # a cut (top_k=K) draws dict maps: the trees' test below covers them
def test_lowbit_samples_follow_the_target_distribution(monkeypatch, top_k):
    """T = 1: three-token outputs of lowbit-drafted decoding match the exact target distribution (chi-square),
    with a different model's int8 copy as the draft (q far from p, so rejections and residual draws are
    exercised; the model's own copy is close to p, too close for the control to bite), drawing from the whole
    vocabulary (``top_k=0``: dense draws). Negative control: a rule that accepts every draft token fails the same
    test."""
    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    draft_model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.6, seed=5)
    prompt = [4, 1, 3]
    exact = _exact_three_token_distribution(model, prompt, SamplingSettings(1.0, 1.0))
    drafter = LowBit(num_tokens=2, runner=TorchInt8Runner(draft_model), top_k=top_k)
    decoder = SelfSpecDecoder(model, None, drafter=drafter)
    V, N = 6, 1500

    def sample(n=N):
        counts = torch.zeros(V ** 3)
        gen = torch.Generator().manual_seed(7)
        drafted = 0
        for _ in range(n):
            out = decoder.generate(prompt, max_new_tokens=3, generator=gen, temperature=1.0)
            a, b, c = out.token_ids
            counts[(a * V + b) * V + c] += 1
            drafted += sum(s.drafted for s in out.steps)
        assert drafted >= n  # it really drafts
        return counts

    assert _chi2_pvalue(sample(), exact) > 1e-3
    import leap.core.decoding.session as session_module
    from leap.core.verify.sampling import sample as sample_token

    def accept_all(draft, q, p, generator):
        return len(draft), sample_token(p[len(draft)], generator)

    monkeypatch.setattr(session_module, "speculative_accept", accept_all)
    control = _chi2_pvalue(sample(NEGATIVE_N), exact)  # a gross bias: far fewer samples show it
    assert control < 1e-6


def _as_map(q):
    """A draw's distribution as a ``{token: probability}`` map (a dense draw reads as one)."""
    return {int(t): round(float(v), 6) for t, v in q.items()}


@settings(max_examples=12, deadline=None)
@given(seeds=st.lists(st.integers(0, 2 ** 16), min_size=3, max_size=3),
       rooms=st.lists(st.integers(0, 7), min_size=3, max_size=3), top_k=st.sampled_from([0, 5]))
def test_sampled_rows_draw_what_each_row_draws_alone(runner_model, seeds, rooms, top_k):
    """``LowBit.propose_sampled_rows`` (a batch at T > 0, depth by depth over the rows): row ``i``'s ``(token, q)``
    pairs are what its own ``propose_sampled`` gives with a generator in the same state, whatever the rows' rooms -
    each row draws with its own generator, from its own logits."""
    prompts = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]

    def rows():
        out = []
        for p in prompts:
            d = LowBit(num_tokens=6, top_k=top_k, runner=FloatRunner(runner_model))
            d.use_sampling(SamplingSettings(1.0, 1.0))
            d.begin(p)
            out.append(d)
        return out

    together = LowBit.propose_sampled_rows(rows(), prompts, rooms, [torch.Generator().manual_seed(s) for s in seeds])
    alone = [d.propose_sampled(p, m, torch.Generator().manual_seed(s)) if m > 0 else []
             for d, p, m, s in zip(rows(), prompts, rooms, seeds)]
    assert [[t for t, _ in row] for row in together] == [[t for t, _ in row] for row in alone]
    assert [len(row) for row in together] == [min(m, 6) for m in rooms]
    assert [[_as_map(q) for _, q in row] for row in together] == [[_as_map(q) for _, q in row] for row in alone]


def test_lowbit_settings_errors_name_the_fix(tiny_llama):
    with pytest.raises(SettingsError, match="num_tokens"):
        LowBit(num_tokens=0)
    with pytest.raises(SettingsError, match="backend"):
        make_runner(tiny_llama, backend="fp2")
    with pytest.raises(SettingsError, match="GGUF"):
        make_runner(tiny_llama, backend="llama.cpp")
    with pytest.raises(SettingsError, match="use_model"):
        make_drafter("lowbit").propose([1, 2], 3)


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
@pytest.mark.parametrize("quant", ["native", "q8_0"])
def test_llama_cpp_runner_on_the_shipped_gguf_agrees_and_stays_in_step(quant, tmp_path, monkeypatch):
    """The default model's own Q4_1 GGUF (as shipped, and re-encoded as Q8_0 by llama.cpp's quantiser) run by
    llama.cpp: in step with the cache after rollbacks, and greedy-lossless with high acceptance against the
    float32 model."""
    from leap.core import load_model
    from leap.core.modeling.low_bit import LlamaCppRunner, gguf_of, requantized

    monkeypatch.setenv("LEAP_CACHE", str(tmp_path))
    model = load_model("smollm2")
    path = requantized(gguf_of(model), quant)
    assert path is not None
    if quant != "native":  # written once into the cache, then reused as is
        assert path.parent == tmp_path / "gguf" and path.stat().st_size > gguf_of(model).stat().st_size
        stamp = path.stat().st_mtime_ns
        assert requantized(gguf_of(model), quant) == path and path.stat().st_mtime_ns == stamp
    runner = LlamaCppRunner(path, n_ctx=512)
    ids = model.encode("Explain what a hash table is.", chat=True)
    a = runner.sync(ids + [100, 200, 300])
    b = runner.sync(ids + [100])  # rollback of two tokens
    fresh = LlamaCppRunner(path, n_ctx=512)
    assert torch.allclose(b, fresh.sync(ids + [100]), atol=1e-3)
    assert not torch.allclose(a, b, atol=1e-3)
    plain = SelfSpecDecoder(model, None).generate(ids, max_new_tokens=48)
    spec = SelfSpecDecoder(model, None, drafter=LowBit(backend="llama.cpp", quant=quant)).generate(ids, max_new_tokens=48)
    assert spec.token_ids == plain.token_ids
    assert spec.acceptance_rate > 0.6


# ---------------------------------------------------------------- trees and the cascade
def test_sibling_trees_are_the_chain_plus_the_next_most_likely_alternatives(runner_model):
    from leap.core.trees.stochastic_tree import sibling_shape

    assert sibling_shape(3, 2) == [0, 0, 1, 1, 3, 3]
    runner = FloatRunner(runner_model)
    chain = LowBit(num_tokens=4, runner=runner).propose([5, 9, 14], 4)
    tree = LowBit(num_tokens=4, runner=runner, shape="siblings", width=3).propose_tree([5, 9, 14], 4)
    assert tree.first_chain() == chain and len(tree) == 12 and tree.depth == 4
    row, context = 0, [5, 9, 14]
    for token in chain:  # at every depth: the draft's three most likely tokens, best first
        top3 = torch.topk(FloatRunner(runner_model).sync(context), 3).indices.tolist()
        assert list(tree.children(row)) == top3
        row, context = tree.children(row)[token], context + [token]


@pytest.mark.parametrize("shape", ["siblings", "delayed"])
def test_lowbit_trees_are_greedy_lossless(tiny_llama, shape):
    plain = SelfSpecDecoder(tiny_llama, None).generate([5, 6, 7, 8], max_new_tokens=40)
    drafter = LowBit(num_tokens=4, shape=shape, trunk=2, branches=2, branch_len=2)
    spec = SelfSpecDecoder(tiny_llama, None, drafter=drafter).generate([5, 6, 7, 8], max_new_tokens=40)
    assert spec.token_ids == plain.token_ids
    assert spec.acceptance_rate > 0 and max(s.drafted for s in spec.steps) > 4  # branching trees were verified


@pytest.mark.heavy
@pytest.mark.parametrize("spec", ["lowbit-siblings", "cascade"])
def test_lowbit_trees_and_cascades_keep_the_target_distribution(spec):
    """T = 1, two tokens: a sampled sibling tree (Gumbel-Top-K alternatives with their exact draw
    distributions) and a cascade (one-hot copies or sampled low-bit drafts) give the exact target
    distribution under Traversal Verification (the negative control of the chain test above shows this
    chi-square has power; a Gumbel-Top-K that forgets to remove earlier children from later ones' ``q``
    turns the tree case red)."""
    from leap.core.drafters.hybrid import Cascade

    model = tiny_model("llama", vocab=6, eos_token_id=None, init=0.3)
    draft = TorchInt8Runner(tiny_model("llama", vocab=6, eos_token_id=None, init=0.6, seed=5))
    prompt = [4, 1, 3]
    V, N = 6, 1200
    exact = _exact_three_token_distribution(model, prompt, SamplingSettings(1.0, 1.0)).view(V, V, V).sum(-1).flatten()
    drafter = LowBit(num_tokens=2, runner=draft, shape="siblings", width=3) if spec == "lowbit-siblings" else \
        Cascade(first="suffix", then=LowBit(num_tokens=2, runner=draft), min_first=1,
                first_min_prob=0.5)
    # trees: Traversal Verification, the rule that reads the recorded draw distributions
    decoder = SelfSpecDecoder(model, None, drafter=drafter, tree_verify="traversal")
    counts, gen, drafted = torch.zeros(V * V), torch.Generator().manual_seed(11), 0
    for _ in range(N):
        out = decoder.generate(prompt, max_new_tokens=2, generator=gen, temperature=1.0)
        counts[out.token_ids[0] * V + out.token_ids[1]] += 1
        drafted += sum(s.drafted for s in out.steps)
    assert drafted >= N
    if spec == "cascade":
        assert min(drafter.used) > 0  # both parts drafted
    assert _chi2_pvalue(counts, exact) > 1e-3


def test_cascade_copies_when_the_context_repeats_and_drafts_otherwise(tiny_llama):
    from leap.core.drafters.hybrid import Cascade

    with pytest.raises(SettingsError, match="first_ or then_"):
        Cascade(num_tokens=3)
    with pytest.raises(SettingsError, match="model-free"):
        Cascade(first="layer-skip")
    cascade = Cascade(then_num_tokens=3, min_first=2)
    SelfSpecDecoder(tiny_llama, None, drafter=cascade).generate([5, 6, 7, 8], max_new_tokens=6)
    assert cascade.used[0] == 0 and cascade.used[1] > 0  # nothing to copy yet: the low-bit draft drafts
    cascade.begin([5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10, 5, 6, 7])
    tree = cascade.propose_tree([5, 6, 7, 8, 9, 10, 5, 6, 7, 8, 9, 10, 5, 6, 7], 4)
    assert tree.first_chain()[:2] == [8, 9] and cascade.used[0] == 1  # the repeat is copied


def test_the_prompt_is_taken_in_when_lowbit_joins_not_in_its_first_step(tiny_llama):
    """A search attaches its drafters when it starts; lowbit ingests the prompt then, so its first step (a trial)
    feeds only the last prompt token (red without LowBit.begin: the whole prompt lands in the first step)."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    decoder = SelfSpecDecoder(tiny_llama, None, drafter="lowbit", drafter_kwargs={"backend": "torch-int8"})
    session = decoder.start(prompt, max_new_tokens=8)
    drafter = decoder.drafter
    session.attach(drafter)
    assert drafter.runner.cached == prompt[:-1]
    fed = []
    feed = drafter.runner.feed
    drafter.runner.feed = lambda tokens: (fed.append(list(tokens)), feed(tokens))[1]
    session.step()
    assert fed[0] == prompt[-1:]


def test_a_window_makes_the_prompts_tail_the_drafts_context_and_stays_lossless(tiny_llama):
    """window=W: the runner takes in only the prompt's last W tokens, then follows everything generated (red when
    the window is ignored); the output is plain decoding's."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=24).token_ids
    decoder = SelfSpecDecoder(tiny_llama, None, drafter="lowbit", drafter_kwargs={"backend": "torch-int8", "window": 4})
    session = decoder.start(prompt, max_new_tokens=24)
    session.attach(decoder.drafter)
    assert decoder.drafter.runner.cached == prompt[-4:-1]
    while not session.done:
        session.step()
    assert session.new_token_ids == plain
    assert decoder.drafter.runner.cached[:4] == prompt[-4:]  # the window's start stays put as the output grows
    # ... and the draft's context follows everything generated (a window frozen at the prompt's tail drafts from a
    # stale context: red): the runner holds the window plus the committed tokens (all but the last step's at most)
    committed = prompt[-4:] + session.new_token_ids
    n = len(committed) - 8
    assert n > 12 and decoder.drafter.runner.cached[:n] == committed[:n]
    with pytest.raises(SettingsError, match="window"):
        LowBit(window=-1)


class _SmallRunner(TorchInt8Runner):
    """An int8 runner whose cache holds 12 tokens and fails past them, as llama.cpp's context does."""

    def __init__(self, model):
        super().__init__(model)
        self.n_ctx = 12

    def _feed(self, tokens):
        if len(self.cached) + len(tokens) > self.n_ctx:
            raise SettingsError("the low-bit draft's context is full")
        return super()._feed(tokens)


@pytest.mark.parametrize("shape", ["chain", "siblings"])
def test_a_request_longer_than_the_drafts_context_drafts_from_its_tail(tiny_llama, shape, capsys, monkeypatch):
    """Issue 33: a prompt longer than the runner's context failed the request (even in a joint search that never
    chose lowbit: it takes in the prompt when it joins). Now the draft keeps to the runner's context: lossless,
    and it still drafts."""
    monkeypatch.setattr(LowBit, "said", set())
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]  # longer than 12
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=30)
    runner = _SmallRunner(tiny_llama)
    spec = SelfSpecDecoder(tiny_llama, None, drafter=LowBit(num_tokens=4, runner=runner, shape=shape)).generate(
        prompt, max_new_tokens=30)
    assert spec.token_ids == plain.token_ids
    assert sum(s.drafted for s in spec.steps) > 0  # (the tail alone predicts little on a random model)
    # issue 54: --drafter-arg n_ctx=8 let acceptance fall to 4% without a word: the short context is said, once
    err = capsys.readouterr().err
    assert err.count("the draft's context (n_ctx=12) is shorter than a request") == 1 and "raise n_ctx" in err
    monkeypatch.setattr(LowBit, "said", set())
    SelfSpecDecoder(tiny_llama, None, drafter=LowBit(num_tokens=4, runner=_SmallRunner(tiny_llama))).generate(
        prompt[:4], max_new_tokens=4)
    assert "n_ctx" not in capsys.readouterr().err  # a request that fits says nothing


def test_llama_cpps_context_is_sized_from_the_model(tiny_llama, monkeypatch):
    import leap.core.modeling.low_bit as low_bit

    seen = {}
    monkeypatch.setattr(low_bit, "LlamaCppRunner", lambda path, n_ctx, threads: seen.setdefault("n_ctx", n_ctx))
    make_runner(tiny_llama, backend="llama.cpp", gguf=__file__)
    assert seen["n_ctx"] == tiny_llama.max_context


def test_falling_back_to_the_int8_runner_is_said_not_silent(tiny_llama, monkeypatch, capsys):
    """Issue 33: without llama-cpp-python the main job's drafter fell back to torch int8 (0.52x) without a word."""
    import importlib.util

    import leap.core.modeling.low_bit as low_bit

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    monkeypatch.setattr(low_bit, "_SAID", set())
    runner = make_runner(tiny_llama, backend="auto", gguf=None)
    assert isinstance(runner, TorchInt8Runner)
    err = capsys.readouterr().err
    assert "torch int8 runner" in err and "llama-cpp-python is not installed" in err


def test_lowbit_options_that_differ_in_chain_length_share_one_runner_in_a_search(tiny_llama):
    """A search over lowbit:num_tokens=6|10|14 takes the prompt in once, not once per option (one runner), and a
    different window keeps a runner of its own; decoding stays lossless."""
    from leap.search.drafter_space import parse_option
    from leap.search.factory import agent_factory
    from leap.search.runner import OnlineSearch, SearchSettings

    options = ["lowbit:num_tokens=2,backend=torch-int8", "lowbit:num_tokens=5,backend=torch-int8",
               "lowbit:num_tokens=5,backend=torch-int8,window=4"]
    factory = agent_factory("mcts", tiny_llama.num_layers, seed=0, drafters=options, drafter_settings=False)
    search = OnlineSearch(SelfSpecDecoder(tiny_llama, None), factory, SearchSettings(budget=4, loss_budget=0.0))
    prompt = [5, 6, 7, 8, 9, 10, 11, 12]
    out = search.generate(prompt, max_new_tokens=20)
    assert out.generation.token_ids == SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=20).token_ids
    a, b, c = (search.drafters[parse_option(o)] for o in options)
    assert a.runner is b.runner and a.runner is not None and c.runner is not a.runner


def test_the_drafts_format_is_checked_and_keys_its_runner(tiny_llama, tmp_path):
    """quant=native is the file itself (nothing written, llama.cpp not needed); an unknown format names the
    choices; options that differ in format never share a runner (their weights differ)."""
    from leap.core.modeling.low_bit import requantized

    assert requantized(tmp_path / "m.gguf", "native") == tmp_path / "m.gguf" and not list(tmp_path.iterdir())
    with pytest.raises(SettingsError, match="q8_0"):
        LowBit(quant="q3_xx")
    with pytest.raises(SettingsError, match="q8_0"):
        make_runner(tiny_llama, backend="torch-int8", quant="int3")
    assert LowBit(num_tokens=6).shared_state_key() == LowBit(num_tokens=10).shared_state_key()
    assert LowBit(quant="q8_0").shared_state_key() != LowBit().shared_state_key()  # the default is native


def test_an_adapted_chain_grows_on_whole_acceptance_shrinks_on_a_cut_and_restarts_per_request():
    drafter = LowBit(num_tokens=4, adapt=10, backend="torch-int8")
    drafter.feedback(4, 4)
    drafter.feedback(6, 6)
    assert drafter.chain == 8
    drafter.feedback(8, 8)
    drafter.feedback(10, 10)
    assert drafter.chain == 10  # capped at adapt
    drafter.feedback(10, 2)
    assert drafter.chain == 6  # halfway towards accepted + 1
    drafter.feedback(6, 0)
    assert drafter.chain == 4  # never below num_tokens
    drafter.feedback(3, 3)  # a chain cut short by the request's end is no evidence to grow on
    assert drafter.chain == 4
    drafter.chain = 9
    drafter.begin([1])
    assert drafter.chain == 4
    fixed = LowBit(num_tokens=4, adapt=0)
    fixed.feedback(4, 4)
    assert fixed.chain == 4
    assert LowBit().adapt == 16 and LowBit(num_tokens=20).adapt == 20  # the default never refuses a long start
    with pytest.raises(SettingsError, match="adapt"):
        LowBit(num_tokens=6, adapt=4)


@pytest.mark.parametrize("adapt", [6, 12])
def test_an_adapted_chain_is_greedy_lossless_and_drafts_longer(tiny_llama, adapt):
    prompt = [3, 9, 4, 4, 7, 1, 2, 8, 3, 9, 4, 4]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=40)
    drafter = LowBit(num_tokens=2, adapt=adapt, backend="torch-int8")
    spec = SelfSpecDecoder(tiny_llama, None, drafter=drafter).generate(prompt, max_new_tokens=40)
    assert spec.token_ids == plain.token_ids
    assert max(s.drafted for s in spec.steps) > 2  # the int8 copy agrees with its model: chains grew


def test_an_adapted_chain_that_is_cut_stays_greedy_lossless(tiny_llama):
    """The int8 copy of the tiny model agrees with it everywhere, so chains are never cut there. Here every
    eleventh position the runner reads proposes its second choice: chains grow, are cut at depth 2 or more,
    shrink and grow again, and the output stays plain greedy decoding's (red when verification keeps a
    mismatched draft token, and when the chain never grows)."""
    from leap.core.modeling.low_bit import LowBitRunner

    class EveryEleventhWrong(LowBitRunner):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.n_ctx = inner, inner.n_ctx

        def _feed(self, tokens):
            logits = self.inner.feed(tokens).clone()
            if len(self.inner.cached) % 11 == 0:
                logits[int(logits.argmax())] = float("-inf")
            return logits

        def _truncate(self, n):
            self.inner.truncate(n)

    prompt = [3, 9, 4, 4, 7, 1, 2, 8, 3, 9, 4, 4]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=60)
    drafter = LowBit(num_tokens=2, adapt=12, runner=EveryEleventhWrong(TorchInt8Runner(tiny_llama)))
    spec = SelfSpecDecoder(tiny_llama, None, drafter=drafter).generate(prompt, max_new_tokens=60)
    assert spec.token_ids == plain.token_ids
    assert any(2 <= s.accepted < s.drafted for s in spec.steps) and max(s.drafted for s in spec.steps) > 6


# ---------------------------------------------------------------- the KV handoff (issue 35)
def test_the_handoff_gives_the_draft_the_targets_prompt_cache_without_running_it(tiny_llama):
    """With the handoff (the default), the runner holds the prompt the moment lowbit joins without a forward pass
    over it: its cache is the target's keys and values of the prompt but its last token, and the first thing it is
    fed is that last token (red when begin ignores the handed cache, or hands over one position too many);
    decoding stays plain decoding's."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=20).token_ids
    drafter = LowBit(backend="torch-int8")
    drafter.use_model(tiny_llama)
    fed = []
    feed = drafter.runner._feed
    drafter.runner._feed = lambda tokens: (fed.append(list(tokens)), feed(tokens))[1]
    session = SelfSpecDecoder(tiny_llama, None, drafter=drafter).start(prompt, max_new_tokens=20)
    session.attach(drafter)
    assert drafter.runner.cached == prompt[:-1] and fed == []
    for i, layer in enumerate(session.cache.layers):
        keys, values = drafter.runner.cache.layers[i].keys, drafter.runner.cache.layers[i].values
        assert keys.shape[2] == len(prompt) - 1
        assert torch.equal(keys, layer.keys[:, :, : len(prompt) - 1]) and torch.equal(values, layer.values[:, :, : len(prompt) - 1])
    while not session.done:
        session.step()
    assert fed[0] == prompt[-1:] and session.new_token_ids == plain


@pytest.mark.parametrize("kwargs", [{"handoff": False}, {"window": 4}])
def test_without_the_handoff_or_with_a_window_the_draft_takes_the_prompt_in_itself(tiny_llama, kwargs):
    """``handoff=false`` (the ablation) and ``window=W`` (the draft's positions start elsewhere) feed the prompt
    through the draft (red when the handoff ignores either)."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    drafter = LowBit(backend="torch-int8", **kwargs)
    drafter.use_model(tiny_llama)
    fed = []
    feed = drafter.runner._feed
    drafter.runner._feed = lambda tokens: (fed.append(list(tokens)), feed(tokens))[1]
    SelfSpecDecoder(tiny_llama, None, drafter=drafter).start(prompt, max_new_tokens=4).attach(drafter)
    assert fed == [prompt[-4:-1] if "window" in kwargs else prompt[:-1]]


def test_a_runner_that_cannot_take_the_cache_takes_the_prompt_in(tiny_llama):
    """A runner whose ``take_kv`` refuses (llama.cpp's check failed, a cache on a GPU) is fed the prompt: lossless
    and in step either way."""
    prompt = [5, 6, 7, 8, 9, 10, 11, 12]

    class Refusing(TorchInt8Runner):
        def take_kv(self, tokens, kv):
            return False

    drafter = LowBit(runner=Refusing(tiny_llama))
    session = SelfSpecDecoder(tiny_llama, None, drafter=drafter).start(prompt, max_new_tokens=12)
    session.attach(drafter)
    assert drafter.runner.cached == prompt[:-1]
    plain = SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=12).token_ids
    while not session.done:
        session.step()
    assert session.new_token_ids == plain


def test_a_drafter_that_joins_late_is_handed_the_prompts_cache_not_the_latest_positions(tiny_llama):
    """The session hands a drafter that joins after plain steps (a search's later trial) the prefill's keys and
    values of the prompt but its last token - positions nothing has written since (red when it hands the whole
    current cache)."""
    from leap.core.drafters.base import Drafter

    class Recording(Drafter):
        name = "recording"
        takes_prompt_kv = True

        def use_prompt_kv(self, kv):
            self.seen = [tuple(t.clone() for t in kv.layer(i)) for i in range(kv.num_layers)]

    prompt = [5, 6, 7, 8, 9, 10, 11]
    session = SelfSpecDecoder(tiny_llama, None).start(prompt, max_new_tokens=10)
    fresh = SelfSpecDecoder(tiny_llama, None).start(prompt, max_new_tokens=10)
    session.step(None, None)
    session.step(None, None)
    late = Recording()
    session.attach(late)
    for (keys, values), layer in zip(late.seen, fresh.cache.layers):
        assert torch.equal(keys, layer.keys[0]) and torch.equal(values, layer.values[0])


# ---------------------------------------------------------------- multi-level drafting: pre=lookup (issue 35)
def test_the_lookup_guesses_what_followed_the_latest_earlier_ngram():
    """3-grams before 2-grams, the latest occurrence, a guess running on into the chain, none without a match; a
    context that does not continue the last one is indexed afresh (red when the index keeps the earliest occurrence,
    or indexes the context's own last n-gram, which has nothing after it)."""
    from leap.core.drafters.prompt_lookup import NgramIndex

    look = NgramIndex()
    context = [1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 7, 2, 3]
    look.cover(context)
    assert look.guess(context, [], 4) == [4, 5, 7, 2]  # 2-gram (2, 3): latest earlier end is before 4
    assert look.guess(context, [4], 3) == [5, 7, 2]  # 3-gram (2, 3, 4)
    assert look.guess(context, [8], 3) == []  # (3, 8), (2, 3, 8): never seen
    assert look.guess(context, [4, 5, 7, 2, 3], 8) == [4, 5, 7, 2, 3, 4, 5, 7]  # into the chain
    assert look.guess(context, [4], 0) == []
    look.cover([6, 6, 6])
    assert look.guess([6, 6, 6], [], 2) == [6]  # (6, 6) ended at 2, followed by one 6; the old request is gone


class _RuleRunner(LowBitRunner):
    """A deterministic "model" over 40 tokens: the next token is a function of the last two, so its chains run into
    cycles that prompt lookup can guess. Counts its passes (a feed_all of several tokens is one)."""

    name = "rule"

    def __init__(self, noise: int = 0):
        super().__init__()
        self.passes, self.noise = 0, noise

    def _next(self, seq):
        a, b = (seq[-2], seq[-1]) if len(seq) > 1 else (0, seq[-1])
        return (3 * a + b + (len(seq) % 7 == 0) * self.noise) % 40

    def _logits(self, seq):
        logits = torch.linspace(0.0, 1.0, 40)  # a spread, for sampling
        logits[self._next(seq)] += 4.0
        return logits

    def _feed(self, tokens):
        self.passes += 1
        return self._logits(self.cached + list(tokens))

    def feed_all(self, tokens):
        self.passes += 1
        rows = [self._logits(self.cached + list(tokens[: i + 1])) for i in range(len(tokens))]
        self.cached.extend(int(t) for t in tokens)
        return torch.stack(rows)

    def _truncate(self, n):
        pass


@settings(max_examples=30, deadline=None)
@given(prompt=st.lists(st.integers(0, 39), min_size=2, max_size=30), noise=st.integers(0, 5),
       steps=st.lists(st.tuples(st.integers(1, 16), st.integers(0, 16)), min_size=1, max_size=5))
def test_a_multi_level_chain_is_the_drafts_own_chain_in_fewer_passes(prompt, noise, steps):
    """With ``pre=lookup`` every chain (greedy, and sampled under the same generator: the same draws) is exactly the
    chain the draft picks token by token, across steps that keep part of each chain, while the runner stays in step;
    over a run the guessed passes never exceed the token-by-token ones (red when a guess is kept without the
    draft's agreement, or the runner is not cut back after a rejected guess)."""
    from leap.core.verify.sampling import SamplingSettings

    plain, multi = LowBit(runner=_RuleRunner(noise), adapt=0, num_tokens=16), LowBit(
        runner=_RuleRunner(noise), adapt=0, num_tokens=16, pre="lookup")
    tokens = list(prompt)
    for d in (plain, multi):
        d.begin(tokens)
        d.use_sampling(SamplingSettings(1.0, 1.0))
    for n, keep in steps:
        a, b = plain.propose(tokens, n), multi.propose(tokens, n)
        assert a == b and multi.runner.cached == tokens + b[: len(multi.runner.cached) - len(tokens)]
        ga, gb = torch.Generator().manual_seed(n), torch.Generator().manual_seed(n)
        assert plain.propose_sampled(tokens, n, ga) == multi.propose_sampled(tokens, n, gb)
        tokens += a[:keep] + [7]
    assert multi.runner.passes <= plain.runner.passes


def test_guesses_that_the_draft_keeps_save_passes_and_the_output_stays_plain_decodings(tiny_llama):
    """On a context that repeats, the rule draft keeps most guesses and drafts in far fewer passes; on the tiny
    model, pre=lookup decoding is plain decoding's output."""
    multi = LowBit(runner=_RuleRunner(), adapt=0, num_tokens=16, pre="lookup")
    plain = LowBit(runner=_RuleRunner(), adapt=0, num_tokens=16)
    tokens = [1, 2]
    for d in (plain, multi):
        d.begin(tokens)
    for _ in range(6):
        chain = plain.propose(tokens, 16)
        assert multi.propose(tokens, 16) == chain
        tokens += chain
    assert multi.guessed_kept > 0.8 * multi.guessed > 0 and multi.runner.passes < plain.runner.passes / 2
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    out = SelfSpecDecoder(tiny_llama, None, drafter="lowbit",
                          drafter_kwargs={"backend": "torch-int8", "pre": "lookup"}).generate(prompt, max_new_tokens=24)
    assert out.token_ids == SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=24).token_ids
    with pytest.raises(SettingsError, match="pre"):
        LowBit(pre="suffix")


def test_a_cascade_passes_the_handoff_on_to_its_lowbit_part(tiny_llama):
    """``cascade`` (suffix, then lowbit) hands its lowbit part the target's prompt cache: no draft pass over the prompt
    when it joins (a search with cascade in its space took ~1.3 s over each 700-token prompt before; red when the
    cascade does not pass it on)."""
    from leap.core.drafters.hybrid import Cascade

    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    cascade = Cascade(then_backend="torch-int8")
    cascade.use_model(tiny_llama)
    fed = []
    feed = cascade.then.runner._feed
    cascade.then.runner._feed = lambda tokens: (fed.append(list(tokens)), feed(tokens))[1]
    session = SelfSpecDecoder(tiny_llama, None, drafter=cascade).start(prompt, max_new_tokens=16)
    session.attach(cascade)
    assert cascade.takes_prompt_kv and cascade.then.runner.cached == prompt[:-1] and fed == []
    while not session.done:
        session.step()
    assert session.new_token_ids == SelfSpecDecoder(tiny_llama, None).generate(prompt, max_new_tokens=16).token_ids


def _on_a_gpu(info=None):
    """What ``unavailable`` reads of a model on a GPU (a CUDA device is not needed to ask)."""
    from types import SimpleNamespace

    return SimpleNamespace(device=torch.device("cuda", 0), info=info or {}, name="m")


@pytest.mark.parametrize("installed", [False, True])
def test_off_the_cpu_lowbit_says_why_it_cannot_draft_and_a_search_leaves_it_out(monkeypatch, tmp_path, installed):
    """On an H200 without llama.cpp, ``leap-drafters`` failed all 13 requests: ``lowbit`` fell back to the CPU-only
    int8 runner at its first request. Off the CPU it must say why before it is made (no llama.cpp; no GGUF), the
    drafter search must leave it and ``cascade`` out with that reason, and ``make_runner`` must raise it."""
    import warnings

    from leap.core.drafters.hybrid import Cascade
    from leap.search.drafter_space import usable_options

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if installed else None) if name == "llama_cpp" else real(name, *a))
    model = _on_a_gpu()
    why = LowBit.unavailable(model)
    assert why and ("GGUF" in why if installed else "llama-cpp-python" in why)
    assert Cascade.unavailable(model) and why in Cascade.unavailable(model)
    assert LowBit.unavailable(model, backend="torch-int8")  # CPU-only, whatever is installed
    with pytest.raises(SettingsError, match="GGUF" if installed else "llama-cpp-python"):
        make_runner(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        kept = usable_options(["suffix", "lowbit", "cascade", "lowbit:num_tokens=10"], model)
    assert [o.name for o in kept] == ["suffix"]
    assert sum("left out" in str(w.message) for w in seen) == 3
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    # with llama.cpp and the model's GGUF, a GPU model's draft runs in llama.cpp: available
    assert (LowBit.unavailable(model, gguf=str(gguf)) is None) == installed
    assert (LowBit.unavailable(_on_a_gpu({"source": str(tmp_path), "gguf_file": "m.gguf"})) is None) == installed
    assert LowBit.unavailable(_on_a_gpu(), runner=object()) is None  # a runner of the caller's own


def test_on_the_cpu_lowbit_is_always_available(tiny_llama):
    assert LowBit.unavailable(tiny_llama) is None and LowBit.unavailable(tiny_llama, backend="torch-int8") is None
