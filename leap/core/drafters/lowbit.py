"""``lowbit``: the model's own weights at low precision draft the chain (a low-bit self-draft).

QSpec (Zhao et al., 2024) and ML-SpecQD (Georganas et al., 2025) draft with a low-precision copy of the
target itself: the same layers, cheaper weights, a distribution close to the target's. Here the copy is
a :class:`~leap.core.modeling.low_bit.LowBitRunner` (the model's GGUF run by llama.cpp, or a weight-int8
copy in torch), with its own KV cache kept in step with the decoder's committed tokens on every
proposal (accepted tokens kept, rejected ones removed).

Greedy: the draft's argmax chain, stopped early when the draft's top probability falls below
``min_confidence``. Sampling: each token drawn from ``q`` = the draft's distribution after the
request's temperature and top-p (the same transform as the target's) - by default the whole of it, kept as one
tensor (:class:`~leap.core.verify.sampling.DenseDraw`); with ``top_k=K`` cut to its ``K`` most likely tokens and
renormalised - the exact distribution the token is drawn from, returned with it, so the speculative sampling rule
(and Traversal Verification for chains) keeps the target distribution. The cut costs acceptance: the tail it drops
is mass ``sum(min(p, q))`` can no longer count (on the default model at T = 1, teacher forced on leap's seed
prompts: 0.89 for the top 64, 0.96 for the whole vocabulary; ``experiments/2026-11-25-lowbit-top-k/lowbit_top_k.py``). Trees list their
candidates, so they keep a cut (``top_k``, or ``TREE_TOP_K`` when it is 0).
Lossless either way: the decoder verifies every token with the full-precision model.

Trees (``shape=``): ``"chain"`` (default); ``"siblings"`` - the chain plus, at every depth, the next
``width - 1`` most likely (greedy) or Gumbel-Top-K drawn (sampling, without replacement) alternatives as
leaves, which cost no extra draft pass (they come from the logits the chain already read); ``"delayed"`` -
a trunk of ``trunk`` tokens, then ``branches`` chains of ``branch_len`` (delayed tree expansion, as in
:mod:`leap.core.trees.stochastic_tree`; each branch is drafted by re-syncing the runner to its path).
Sampled trees carry each node's exact draw distribution, so Traversal Verification and the tree rules
apply unchanged.

Long prompts: the runner takes in the prompt when the drafter joins a request, and llama.cpp may take longer over
it than the full model's prefill (``docs/data/joint_v4``: 2.2-2.4 s against 1.1-1.2 s on the rag and
summarization prompts), which was most of what ``lowbit`` lost there. The KV handoff (``handoff=true``, the
default; :meth:`use_prompt_kv`) writes the target's keys and values of the prompt into the draft's cache
instead. ``window=W`` makes the draft's context the prompt's last ``W`` tokens plus everything generated (0, the
default: the whole prompt; no handoff then).

Model-free drafts first: ``hybrid`` puts this drafter behind a model-free one
(``hybrid:free=suffix,then=lowbit``; :mod:`leap.core.drafters.hybrid`).

Who calls what: the decoding session calls :meth:`use_model` and :meth:`use_sampling` when the drafter
joins it, then ``propose`` / ``propose_sampled`` every step. ``--drafter lowbit --drafter-arg
backend=torch-int8`` picks a runner; ``gguf=PATH`` names a GGUF file for a model loaded otherwise; ``quant=q8_0``
(or another of :data:`~leap.core.modeling.low_bit.QUANTS`) re-encodes that GGUF with llama.cpp's quantiser first.
The default, ``native``, drafts with the GGUF as shipped (the default model's Q4_1): with the KV handoff the draft no
longer takes prompts in, where Q8_0 was faster, and per draft token Q4_1 is the cheaper of the two at the same
acceptance - on leap's seed prompts (never Spec-Bench; ``experiments/2026-11-25-draft-cost/draft_cost.py``) 11.9 against 14.1 ms on this
project's Xeon (``docs/data/draft_cost_xeon.json``) and 9.8 against 9.5 ms with higher acceptance on its earlier
EPYC (``docs/data/draft_cost.json``);
``LowBit(runner=...)`` drafts with any :class:`~leap.core.modeling.low_bit.LowBitRunner` of your own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from leap.core.drafters.base import Drafter, drafters
from leap.core.drafters.prompt_lookup import NgramIndex
from leap.core.errors import SettingsError
from leap.core.runtime.notices import say_once
from leap.core.modeling.low_bit import QUANTS, LowBitRunner, make_row_runners, make_runner, runner_unavailable
from leap.core.trees.draft_tree import DraftTree
from leap.core.trees.stochastic_tree import delayed_shape, fill_shape, gumbel_top_k, most_likely, sibling_shape
from leap.core.verify.sampling import DenseDraw, SamplingSettings, target_probs

__all__ = ["LowBit", "SHAPES", "PRE"]

SHAPES = ("chain", "siblings", "delayed")
PRE = ("none", "lookup")  # the chain's cheaper first level (multi-level drafting): none, or prompt lookup
PRE_TRIAL = 16  # guessed tokens before ``pre_min_kept`` decides whether the first level goes on guessing
TREE_TOP_K = 64  # a tree's candidates per node when ``top_k=0`` (a tree lists its candidates; chains draw densely)


@drafters.register("lowbit")
class LowBit(Drafter):
    """The model's own weights at low precision (GGUF via llama.cpp, or int8 in torch) draft the chain."""

    name = "lowbit"
    needs_model = True
    #: chain length caps lowbit where its draft agrees almost everywhere; the chain adapts within a request
    #: (``adapt``, default 16), ``num_tokens`` is where it starts and its floor
    search_settings = {"num_tokens": (6, 10, 14)}
    samples_drafts = True
    takes_prompt_kv = keeps_context = True  # the KV handoff (``handoff``, default on); a context of its own
    said: set[str] = set()  # the notices said in this process (tests clear it)
    host_reads_per_node = 1  # logits are host tensors; under sampling a drawn token may cross to the generator's device

    def __init__(self, num_tokens: int = 6, min_confidence: float = 0.0, backend: str = "auto",
                 gguf: str | None = None, threads: int | None = None, n_ctx: int = 0,
                 top_k: int = 0, runner: LowBitRunner | None = None, shape: str = "chain", width: int = 2,
                 trunk: int = 4, branches: int = 2, branch_len: int = 2, window: int = 0,
                 quant: str = "native", adapt: int | None = None, handoff: bool = True, pre: str = "none",
                 pre_tokens: int = 8, pre_min_kept: float = 0.5) -> None:
        if num_tokens < 1:
            raise SettingsError(f"lowbit: num_tokens must be >= 1, got {num_tokens}")
        if shape not in SHAPES:
            raise SettingsError(f"lowbit: unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
        if width < 1 or trunk < 0 or branches < 1 or branch_len < 1:
            raise SettingsError("lowbit: width >= 1, trunk >= 0, branches >= 1 and branch_len >= 1")
        if int(window) < 0:
            raise SettingsError(f"lowbit: window must be >= 0 (0: the whole prompt), got {window}")
        self.window, self.handoff = int(window), bool(handoff)
        if pre not in PRE:
            raise SettingsError(f"lowbit: unknown pre {pre!r}; choose one of {', '.join(PRE)}")
        if int(pre_tokens) < 1:
            raise SettingsError(f"lowbit: pre_tokens must be >= 1, got {pre_tokens}")
        if not 0.0 <= pre_min_kept <= 1.0:
            raise SettingsError(f"lowbit: pre_min_kept must be in [0, 1], got {pre_min_kept}")
        self.pre, self.pre_tokens, self.pre_min_kept = pre, int(pre_tokens), float(pre_min_kept)
        self._lookup = NgramIndex() if pre == "lookup" else None
        self.guessed = self.guessed_kept = 0  # the first level's guesses this request, and how many the draft kept
        self._prompt_kv = None  # the target's keys and values of the prompt, between use_prompt_kv and begin
        self._start = 0  # where the draft's context begins in this request's tokens (window > 0: the prompt's tail)
        self.shape, self.skeleton = shape, (sibling_shape(num_tokens, width) if shape == "siblings"
                                            else delayed_shape(trunk, branches, branch_len) if shape == "delayed" else None)
        self.tree_nodes = len(self.skeleton) if self.skeleton else 0
        if not 0.0 <= min_confidence < 1.0:
            raise SettingsError(f"lowbit: min_confidence must be in [0, 1), got {min_confidence}")
        self.num_tokens = int(num_tokens)
        adapt = max(16, self.num_tokens) if adapt is None else int(adapt)  # default: adapt up to 16 (or num_tokens)
        if adapt and adapt < self.num_tokens:
            raise SettingsError(f"lowbit: adapt (the longest chain) must be 0 (off) or >= num_tokens, got {adapt}")
        self.adapt = int(adapt)
        self.chain = self.num_tokens  # this step's chain length: num_tokens, or adapted within [num_tokens, adapt]
        if int(top_k) < 0:
            raise SettingsError(f"lowbit: top_k must be >= 0 (0: the whole vocabulary), got {top_k}")
        self.min_confidence, self.top_k = float(min_confidence), int(top_k)
        if quant not in QUANTS:
            raise SettingsError(f"lowbit: unknown quant {quant!r}; choose one of {', '.join(QUANTS)}")
        self.runner_args = dict(backend=backend, gguf=gguf, threads=threads, n_ctx=n_ctx, quant=quant)
        self.runner: LowBitRunner | None = runner  # a runner given here is used as is (any model)
        self._model_id, self._fixed = None, runner is not None  # the model the runner was made for; a given runner
        self.settings = SamplingSettings(0.0, 1.0)

    @classmethod
    def unavailable(cls, model: Any, runner: LowBitRunner | None = None, backend: str = "auto",
                    gguf: str | None = None, **kwargs: Any) -> str | None:
        """Off the CPU, no runner without llama.cpp and the model's GGUF (:func:`runner_unavailable`); a
        ``runner`` given is the caller's."""
        return None if runner is not None else runner_unavailable(model, backend, gguf)

    # ------------------------------------------------------------------ hooks
    def use_model(self, model: Any) -> None:
        if not self._fixed and (self.runner is None or self._model_id != id(model)):
            self.runner = make_runner(model, **self.runner_args)
            self._model_id = id(model)

    def shared_state_key(self):
        """Options that differ in drafting settings only (num_tokens, min_confidence, top_k, shape) share a runner:
        its cache follows whichever drafts, and the prompt is taken in once."""
        return None if self._fixed else ("lowbit", tuple(sorted(self.runner_args.items())), self.window)

    def share_state(self, other: Drafter) -> None:
        self.runner, self._model_id = other.runner, getattr(other, "_model_id", None)

    def use_sampling(self, settings: SamplingSettings) -> None:
        self.settings = settings

    def _runner(self) -> LowBitRunner:
        if self.runner is None:
            raise SettingsError("lowbit: no model bound; the decoding session calls use_model(model) first")
        return self.runner

    def begin(self, prompt: Sequence[int], take_in: bool = True) -> None:
        """Take in the prompt now, when the drafter joins the request (on the request's clock, as before), so that
        its first draft step - a search's first trial of ``lowbit`` - times drafting, not the prompt's ingestion.
        With a ``window``, only the prompt's last ``window`` tokens (and then everything generated) are the
        draft's context: a long prompt is taken in faster, the draft sees less of it (lossless either way)."""
        self._start = max(len(prompt) - self.window, 0) if self.window else 0
        self.chain = self.num_tokens
        self.guessed = self.guessed_kept = 0
        kv, self._prompt_kv = self._prompt_kv, None
        if self.runner is not None and len(prompt) > 1:
            context = self._context(prompt, 0)
            held = self.runner.cached[: len(context) - 1] == context[:-1]  # a search option sharing the runner
            handed = (kv is not None and self.handoff and self._start == 0 and len(context) > 1 and not held
                      and self.runner.take_kv(context[:-1], kv))
            if take_in and len(context) > 1 and not handed:  # (begin_rows: the rows' are taken in together later)
                self.runner.sync(context[:-1])

    def use_prompt_kv(self, kv: Any) -> None:
        """The KV handoff (``handoff=true``, the default; issue 35): :meth:`begin` writes the target's keys and values
        of the prompt into the draft's cache (:meth:`~leap.core.modeling.low_bit.LowBitRunner.take_kv`) instead of
        running the draft over it - on llama.cpp a copy instead of a prompt-long forward pass, which cost more than
        the target's own prefill on long prompts. Not with a ``window`` (the draft's positions start elsewhere)."""
        self._prompt_kv = kv

    def _context(self, tokens: Sequence[int], extra: int) -> list[int]:
        """The draft's context for ``tokens`` plus ``extra`` tokens to come: from ``_start`` on, never more than the
        runner holds (``n_ctx``). A longer request slides the start to keep the last half of the runner's context
        (taken in again once, then extended for another half): it drafts from its tail instead of failing, said once."""
        limit = self._runner().n_ctx
        if limit is not None and len(tokens) - self._start + extra > limit:
            say_once(f"leap: lowbit: the draft's context (n_ctx={limit}) is shorter than a request; it drafts from the "
                     f"last {limit // 2} tokens only and accepts less - raise n_ctx (0: the model's own)", LowBit.said)
            self._start = min(max(len(tokens) + extra - limit // 2, 0), len(tokens) - 1)
        return list(tokens[self._start:])

    # ------------------------------------------------------------------ the rows of a batch (issue 37)
    @classmethod
    def join_rows(cls, rows: Sequence[Drafter], model: Any) -> None:
        """Rows alike (same settings, no runner yet: none given or shared) share one runner context, a sequence each
        (:func:`~leap.core.modeling.low_bit.make_row_runners`), so that :meth:`propose_rows` drafts them together."""
        mine = [r for r in rows if isinstance(r, LowBit) and r.runner is None]
        if len(mine) < 2 or len({tuple(sorted(r.runner_args.items())) for r in mine}) > 1:
            return
        for row, runner in zip(mine, make_row_runners(model, len(mine), **mine[0].runner_args)):
            row.runner, row._model_id = runner, id(model)

    @classmethod
    def begin_rows(cls, rows: Sequence[Drafter], prompts: Sequence[Sequence[int]]) -> None:
        """:meth:`begin` of every row without taking the prompts in: a row handed its prefill's cache takes it now (the
        KV handoff, a copy); the others' first :meth:`propose_rows` takes them in together (one pass where the rows
        share a context), and a batch that never drafts (a cap of 0 chosen by
        :class:`~leap.core.policies.batch_caps.GoodputBandit`) never pays for them (issue 37: at B = 8 the prompts'
        ingestion was a fixed cost even where speculation was off)."""
        for r, p in zip(rows, prompts):
            if isinstance(r, LowBit):
                r.begin(p, take_in=False)
            else:
                r.begin(p)

    @classmethod
    def propose_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                     max_tokens: Sequence[int]) -> list[list[int]]:
        """Every row's greedy chain (what its :meth:`propose` gives), drafted depth by depth: one runner pass feeds
        every row still drafting its latest token."""
        if not all(isinstance(r, LowBit) and r.skeleton is None for r in rows):
            return super().propose_rows(rows, tokens, max_tokens)

        def pick(i: int, logits: torch.Tensor, out: list[int]) -> int | None:
            token = int(torch.argmax(logits).item())
            low = rows[i].min_confidence and out and \
                torch.softmax(logits, dim=-1)[token].item() < rows[i].min_confidence
            return None if low else token

        return cls._draft_rows(rows, tokens, max_tokens, pick)

    @classmethod
    def propose_sampled_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                             max_tokens: Sequence[int], generators: Sequence[Any]) -> list[list[tuple[int, Any]]]:
        """Every row's drawn chain (what its :meth:`propose_sampled` gives with its own generator, the first level's
        guesses aside), drafted depth by depth as :meth:`propose_rows`: at T > 0 each row's llama.cpp pass ran alone,
        B passes a depth where one does."""
        if not all(isinstance(r, LowBit) and r.skeleton is None for r in rows):
            return super().propose_sampled_rows(rows, tokens, max_tokens, generators)
        draws: list[list[Any]] = [[] for _ in rows]
        chains = cls._draft_rows(rows, tokens, max_tokens,
                                 lambda i, logits, out: rows[i]._draw(logits, generators[i], draws[i]))
        return [list(zip(chain, q)) for chain, q in zip(chains, draws)]

    @classmethod
    def _draft_rows(cls, rows: Sequence[LowBit], tokens: Sequence[Sequence[int]], max_tokens: Sequence[int],
                    pick) -> list[list[int]]:
        """The rows' chains of up to ``min(max_tokens[i], chain)`` tokens, each ``pick(i, logits, row i's chain so
        far)`` (None: row ``i`` stops): the rows synced together, then one :meth:`LowBitRunner.feed_rows` a depth."""
        n = [min(m, r.chain) for r, m in zip(rows, max_tokens)]
        out: list[list[int]] = [[] for _ in rows]
        live = [i for i in range(len(rows)) if n[i] > 0]
        if not live:
            return out
        logits = LowBitRunner.sync_rows([rows[i]._runner() for i in live],
                                        [rows[i]._context(tokens[i], rows[i].chain) for i in live])
        while live:
            going = []
            for i, row_logits in zip(live, logits):
                token = pick(i, row_logits, out[i])
                if token is not None:
                    out[i].append(token)
                    if len(out[i]) < n[i]:
                        going.append(i)
            live = going
            if live:
                runners = [rows[i]._runner() for i in live]
                logits = type(runners[0]).feed_rows(runners, [[out[i][-1]] for i in live])
        return out

    # ------------------------------------------------------------------ drafting
    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        def pick(logits: torch.Tensor, out: list[int]) -> int | None:
            token = int(torch.argmax(logits).item())  # the runner is on the host: one read per token
            if self.min_confidence and out and torch.softmax(logits, dim=-1)[token].item() < self.min_confidence:
                return None
            return token

        return self._chain(tokens, max_tokens, pick)

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int,
                        generator: torch.Generator | None) -> list[tuple[int, dict[int, float]]]:
        draws: list[Any] = []
        return list(zip(self._chain(tokens, max_tokens, lambda logits, out: self._draw(logits, generator, draws)),
                        draws))

    def _draw(self, logits: torch.Tensor, generator: torch.Generator | None, draws: list[Any]) -> int:
        """A token drawn from the draft's ``logits`` after the request's temperature and top-p (cut to ``top_k``);
        the exact distribution it was drawn from goes on ``draws``, as the speculative sampling rule needs."""
        probs = target_probs(logits.unsqueeze(0), self.settings)[0]
        top = torch.topk(probs, min(self.top_k, probs.numel())) if self.top_k else None  # 0: the whole of it
        q = probs if top is None else top.values / top.values.sum()  # drawn from: exact, as the rule needs
        index = int(torch.multinomial(q.to(generator.device) if generator is not None else q, 1,
                                      generator=generator).item())
        if top is None:
            draws.append(DenseDraw(probs))  # one tensor, not a map of the whole vocabulary
            return index
        ids, values = top.indices.tolist(), q.tolist()
        draws.append({i: v for i, v in zip(ids, values) if v > 0.0})
        return ids[index]

    def _chain(self, tokens: Sequence[int], max_tokens: int, pick) -> list[int]:
        """The draft's chain of up to ``min(max_tokens, chain)`` tokens, each ``pick(logits, chain so far)`` (None:
        stop). With ``pre="lookup"`` (multi-level drafting, ML-SpecQD-style; issue 35) a cheaper first level - prompt
        lookup over the draft's context - guesses how the chain goes on, the draft reads its logits after every
        guessed token in one pass (:meth:`~leap.core.modeling.low_bit.LowBitRunner.feed_all`) and keeps the guesses
        its own picks agree with, then picks its next token from the logits already read: the picks (the draws under
        sampling) the draft makes token by token, from the logits of a pass over several tokens - which llama.cpp
        computes with other kernels than one token's, so a near-tie may round the other way (measured on the
        default model: M 9.14 -> 8.53 on one summarization prompt). Only the number of draft passes is meant to
        change; lossless either way. A request whose guesses the draft keeps rarely stops guessing
        (:meth:`_guessing`)."""
        runner = self._runner()
        context = self._context(tokens, self.chain)
        n = min(max_tokens, self.chain)
        if n <= 0:
            return []
        if self._lookup is not None:
            self._lookup.cover(context)
        rows, guess, out = runner.sync(context).unsqueeze(0), [], []
        while True:
            j = 0
            while True:  # the draft's picks from the logits read: along the guess while it agrees
                token = pick(rows[j], out)
                if token is None:
                    return out
                out.append(token)
                if len(out) >= n:
                    return out
                if j < len(guess) and token == guess[j]:
                    j += 1
                    self.guessed_kept += 1
                    continue
                break
            runner.truncate(len(context) + len(out) - 1)  # holds the context and the chain but its last token
            guess = self._lookup.guess(context, out, min(n - len(out) - 1, self.pre_tokens)) if self._guessing() else []
            self.guessed += len(guess)
            rows = runner.feed_all([out[-1], *guess]) if guess else runner.feed([out[-1]]).unsqueeze(0)

    def _guessing(self) -> bool:
        """Whether the first level still guesses in this request: once it has guessed ``PRE_TRIAL`` tokens, only while
        the draft keeps at least ``pre_min_kept`` of them (a rejected guess costs its tokens' logits in the pass)."""
        return self._lookup is not None and (self.guessed < PRE_TRIAL or self.guessed_kept >= self.pre_min_kept * self.guessed)

    def feedback(self, drafted: int, accepted: int) -> None:
        """Chain length adapted within the request (``adapt`` > 0; in the spirit of DEL, arXiv 2504.05598, and
        ik_llama.cpp's draft-length autotuning): a chain accepted whole grows by 2 up to ``adapt``; one cut at position
        ``accepted`` shrinks halfway towards ``accepted + 1``, never below ``num_tokens``. Reads nothing back."""
        if not self.adapt or drafted <= 0:
            return
        if accepted >= drafted and drafted >= self.chain:
            self.chain = min(self.chain + 2, self.adapt)
        elif accepted < drafted:
            self.chain = max(self.num_tokens, (self.chain + accepted + 1) // 2)

    def steady_start(self) -> None:
        """The chain starts at ``adapt``, where a request's ramp (+2 a step accepted whole) ends; cut, it shrinks."""
        self.chain = self.adapt or self.num_tokens

    # ------------------------------------------------------------------ trees
    def _entry(self, tokens: Sequence[int], sampled: bool):
        """``lookup(path)`` for :func:`fill_shape`: the draft's candidates after ``tokens + path``."""
        runner = self._runner()
        context = self._context(tokens, len(self.skeleton or ()))  # a path is never longer

        def lookup(path):
            logits = runner.sync(context + list(path))
            probs = target_probs(logits.unsqueeze(0), self.settings)[0] if sampled else torch.softmax(logits, -1)
            top = torch.topk(probs, min(self.top_k or TREE_TOP_K, probs.numel()))
            return top.indices.tolist(), (top.values / top.values.sum()).tolist()

        return lookup

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        if self.skeleton is None:
            return super().propose_tree(tokens, max_depth)
        return fill_shape(self.skeleton, self._entry(tokens, False), most_likely, max_depth)

    def propose_sampled_tree(self, tokens: Sequence[int], max_depth: int, generator) -> DraftTree:
        if self.skeleton is None:
            return super().propose_sampled_tree(tokens, max_depth, generator)
        return fill_shape(self.skeleton, self._entry(tokens, True), gumbel_top_k(generator), max_depth)
