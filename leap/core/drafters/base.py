"""The :class:`Drafter` interface and the ``drafters`` registry.

Lifecycle, as :class:`leap.core.decoding.decoder.DecodingSession` drives it:

1. ``begin(prompt_ids)`` when a session starts (a new request);
2. each step: ``propose_tree(tokens, max_depth)`` -> a :class:`~leap.core.trees.draft_tree.DraftTree` of
   candidates following ``tokens`` (prompt + output so far; the last one is committed). The default
   is the chain of ``propose(tokens, max_tokens)``; drafters with ``tree_nodes > 1`` may branch, and
   a branching tree is verified with tree attention (model-free only: no layer continuation).
   Model-free proposals are deterministic: draft probability 1 (a one-hot ``q`` for speculative
   sampling); under sampling, drafters with ``samples_drafts`` are asked for
   ``propose_sampled_tree(tokens, max_depth, generator)`` instead, whose nodes carry the ``q`` their
   tokens were drawn from;
3. ``continue_with_layers(n)``: after ``n`` proposed tokens, should the layer-skip draft (the step's
   ``LayerConfig``) continue the chain? False for model-free drafters, True for ``layer-skip``;
   ``hybrid`` says True when its model-free part had no confident candidate;
4. after verification: ``observe_features(start, features)`` (drafters with ``needs_features``), ``observe(inputs, logits)`` with the verified inputs that were correct and the
   target's logits after each (only drafters with ``needs_logits = True``, and every such drafter the
   session has used, so their state stays current whichever drafter drafted), then
   ``feedback(drafted, accepted)``;
5. ``finish(tokens)`` when the session ends (prompt + the whole output).

The step's :class:`~leap.core.decoding.outcome.StepRecord` carries each drafter's cost: ``draft_time_s``
(wall time of proposing and layer drafting) and ``layer_passes`` (decoder-layer evaluations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from leap.core.trees.draft_tree import DraftTree
from leap.core.registry import Registry

if TYPE_CHECKING:
    import torch

    from leap.core.runtime.costs import Calibration

__all__ = ["Drafter", "drafters", "make_drafter"]


def _stable(value: Any) -> str:
    """A value's text that is the same in every process (an object's repr names its address: its type instead)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_stable(v) for v in value) + ")"
    return type(value).__qualname__


class Drafter:
    """Base class: override :meth:`propose` (and the hooks you need)."""

    name = "base"
    #: whether the layer-skip draft of the step's LayerConfig may continue this drafter's chain (the search
    #: then pairs the drafter with a configuration; calibration times only drafters without layers)
    uses_layers = False
    #: whether the drafter reads the machine's costs (:meth:`use_costs`, called when it joins a session)
    needs_costs = False
    #: whether the drafter runs a model of its own built from the target (:meth:`use_model`, called when it
    #: joins a session or is calibrated; e.g. the low-bit self-draft)
    needs_model = False
    needs_logits = False  # True: observe() receives the verifier's logits after every step
    #: the settings a search over drafters may tune, each with the values it tries (``{"num_tokens": (6, 10,
    #: 14)}``): :func:`leap.search.drafter_space.expand_settings` makes one option per combination, so every
    #: agent searches them through the option dimension (issue 34); empty: the drafter's own defaults only
    search_settings: dict[str, tuple] = {}
    #: True: :meth:`observe_features` receives the verifier's top-layer features (final-normed: what its LM
    #: head reads) at every verified position, the prompt's included (EAGLE heads, :mod:`leap.heads`)
    needs_features = False
    #: arguments that make the drafter run on any model with no files of its own (the registry-wide
    #: contract tests build every registered drafter with them; e.g. an untrained head)
    example_kwargs: dict[str, Any] = {}
    #: the length of the context match behind the latest proposal (suffix, prompt lookup), or None for
    #: drafters without a match signal; gated and select bucket their statistics by it
    last_match: int | None = None
    #: True: under sampling the decoder calls :meth:`propose_sampled`, whose tokens are drawn from a draft
    #: distribution ``q`` the drafter returns with them (used in the speculative sampling rule)
    samples_drafts = False
    tree_nodes = 0  # > 1: propose_tree() may return a branching tree of at most this many nodes
    #: the most host reads of device tensors (syncs on a GPU) the drafter's own hooks (proposals, observe,
    #: feedback) make in one decoding step: ``host_reads_per_step + host_reads_per_node * drafted nodes``;
    #: ``tests/core/runtime/test_host_reads.py`` holds every registered drafter to it. Tensors a drafter
    #: makes on the host by construction (:func:`leap.core.runtime.host_reads.on_host`) are free.
    host_reads_per_step = 0
    host_reads_per_node = 0
    #: a layer ``k``: the layer-skip draft runs only the step's configuration below ``k`` (all of those
    #: layers when the step has none) and reads its tokens from :meth:`exit_logits` of the residual stream
    #: entering layer ``k`` instead of the model's final norm and LM head (Kangaroo/DVI heads,
    #: :mod:`leap.heads.exit_drafter`); None: the layer draft ends with the model's own head
    exit_layer: int | None = None
    #: True (with an :attr:`exit_layer`): after every step it drafted, :meth:`observe_exit_states` receives the
    #: verified positions' inputs of that layer and the verifier's logits there (online learning)
    needs_exit_states = False

    #: True: the decoding session hands the drafter the target's keys and values of the prompt
    #: (:meth:`use_prompt_kv`, right before :meth:`begin`), which a drafter with a KV cache of its own may take
    #: instead of computing them (``lowbit``'s KV handoff, issue 35)
    takes_prompt_kv = False

    #: True: the drafter keeps a context of its own (a KV cache) and takes in, when it next drafts, every token
    #: committed since it last did - so its first step after steps it did not draft also pays for those (a batch's
    #: goodput bandit leaves that step unmeasured with ``first_step_setup="switch"``: :class:`~leap.core.decoding.batch.BatchDecoder`)
    keeps_context = False

    def use_prompt_kv(self, kv: Any) -> None:
        """The target's keys and values of the prompt but its last token (a
        :class:`~leap.core.modeling.kv_cache.PromptKV`, a view valid until :meth:`begin` returns); called right
        before :meth:`begin` for drafters with :attr:`takes_prompt_kv`."""

    def begin(self, prompt: Sequence[int]) -> None:
        """A new request starts with these prompt tokens."""

    # ------------------------------------------------------------------ the rows of a batch (issue 37)
    @classmethod
    def join_rows(cls, rows: Sequence[Drafter], model: Any) -> None:
        """:class:`leap.core.decoding.batch.BatchDecoder` made ``rows``, one instance per batch row, before their
        first request: a class whose model drafts faster for several rows at once may give them one shared state
        (``lowbit``: one llama.cpp context, a sequence per row). The base leaves them independent."""

    @classmethod
    def begin_rows(cls, rows: Sequence[Drafter], prompts: Sequence[Sequence[int]]) -> None:
        """:meth:`begin` of every row's new request (default: one after the other; ``lowbit`` takes the prompts in
        together)."""
        for d, p in zip(rows, prompts):
            d.begin(p)

    @classmethod
    def propose_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                     max_tokens: Sequence[int]) -> list[list[int]]:
        """Greedy chains for the rows of a batch: row ``i``'s is what ``rows[i].propose(tokens[i], max_tokens[i])``
        gives (default: exactly that, one row after the other; ``lowbit`` drafts every row's next token in one
        pass)."""
        return [d.propose(t, m) if m > 0 else [] for d, t, m in zip(rows, tokens, max_tokens)]

    @classmethod
    def propose_sampled_rows(cls, rows: Sequence[Drafter], tokens: Sequence[Sequence[int]],
                             max_tokens: Sequence[int], generators: Sequence[Any]) -> list[list[tuple[int, Any]]]:
        """Under sampling, for drafters with ``samples_drafts``: row ``i``'s ``(token, q)`` pairs are what
        ``rows[i].propose_sampled(tokens[i], max_tokens[i], generators[i])`` gives, each row drawing with its own
        generator (default: exactly that, one row after the other; ``lowbit`` drafts every row's next token in one
        pass). :class:`~leap.core.decoding.batch_session.BatchSession` calls it at T > 0, as :meth:`propose_rows` at
        T = 0."""
        return [d.propose_sampled(t, m, g) if m > 0 else [] for d, t, m, g in zip(rows, tokens, max_tokens, generators)]

    def propose(self, tokens: Sequence[int], max_tokens: int) -> list[int]:
        """Up to ``max_tokens`` candidate tokens to follow ``tokens`` (prompt + output so far)."""
        raise NotImplementedError

    def propose_tree(self, tokens: Sequence[int], max_depth: int) -> DraftTree:
        """Candidates as a tree at most ``max_depth`` deep (default: the chain of :meth:`propose`)."""
        return DraftTree.chain(self.propose(tokens, max_depth)[:max_depth])

    def propose_sampled(self, tokens: Sequence[int], max_tokens: int,
                        generator) -> list[tuple[int, dict[int, float]]]:
        """Under sampling, for drafters with ``samples_drafts``: ``(token, q)`` pairs, each token drawn from
        ``q`` (a ``{token: probability}`` map summing to 1) given the tokens before it."""
        raise NotImplementedError(f"{type(self).__name__} sets samples_drafts but has no propose_sampled")

    def propose_sampled_tree(self, tokens: Sequence[int], max_depth: int, generator) -> DraftTree:
        """Under sampling, for drafters with ``samples_drafts``: a tree whose nodes carry the distribution
        their token was drawn from (:attr:`DraftTree.draws`); default: the chain of :meth:`propose_sampled`."""
        drawn = self.propose_sampled(tokens, max_depth, generator)[:max_depth]
        return DraftTree.chain([t for t, _ in drawn], [q for _, q in drawn])

    @classmethod
    def unavailable(cls, model: Any, **kwargs: Any) -> str | None:
        """Why this drafter, made with ``kwargs``, cannot draft for ``model`` (e.g. no trained head for it),
        or None when it can. Cheap: called before the drafter is made. A search over drafters
        (:func:`leap.search.drafter_space.usable_options`) leaves out an option that says why, with a warning
        naming the reason; the base says None."""
        return None

    @classmethod
    def fingerprint(cls, model: Any, **kwargs: Any) -> str:
        """What an option of this drafter made with ``kwargs`` means today, as a short hash: the class and its
        constructor's arguments, defaults filled in. :class:`~leap.search.memory.SearchMemory` forgets what an
        option measured once this changes - a default changed between leap versions (``lowbit``'s format, its
        adapted chain) made the remembered option another drafter under the same label, and the stale memory
        steered the search (the main job well below its speed from an empty memory, in a run by hand). Drafters whose meaning
        depends on more override it and combine: their parts' (``cascade``), a trained file's (heads)."""
        import hashlib
        import inspect

        params = inspect.signature(cls.__init__).parameters.values()
        filled = {p.name: kwargs.get(p.name, p.default) for p in params
                  if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        filled.update({k: v for k, v in kwargs.items() if k not in filled})  # **kwargs a drafter passes on
        text = f"{cls.__module__}.{cls.__qualname__}:" + ",".join(f"{k}={_stable(v)}" for k, v in sorted(filled.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @classmethod
    def exit_layer_of(cls, num_layers: int, **kwargs: Any) -> int | None:
        """The :attr:`exit_layer` this drafter, made with ``kwargs``, will have on a model of ``num_layers``
        layers (None: it has none). Cheap: called before the drafter is made, by a joint search space
        (:class:`leap.search.drafter_space.JointSpace`) that needs to know which layer decisions matter for it -
        only those below the exit. The base says None."""
        return None

    def continue_with_layers(self, proposed: int) -> bool:
        """After ``proposed`` model-free tokens, should the layer-skip draft continue the chain?"""
        return False

    def exit_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """For drafters with an :attr:`exit_layer`: ``hidden`` (``[1, q, H]``, the residual stream entering
        that layer) -> draft logits ``[q, V]`` over the full vocabulary (float32), as the model's own head gives."""
        raise NotImplementedError(f"{type(self).__name__} sets exit_layer but has no exit_logits")

    def propose_exit_tree(self, layers: Any, max_depth: int) -> DraftTree:
        """For drafters with an :attr:`exit_layer` and ``tree_nodes > 1``, under greedy decoding: a tree at most
        ``max_depth`` deep drafted through ``layers``, a :class:`leap.core.decoding.exit_tree.ExitTreeLayers` (not
        imported: the decoding code sits above the drafters) - the step's configuration below the exit layer, run
        over one batch of nodes per depth with tree attention: ``layers.root()`` gives the exit's logits after the
        pending token, ``layers.expand(tokens, parents)`` those of a batch of children. The session rolls the
        layers back and verifies the tree with the full model."""
        raise NotImplementedError(f"{type(self).__name__} sets exit_layer and tree_nodes but has no propose_exit_tree")

    def observe_exit_states(self, states: torch.Tensor, logits: torch.Tensor) -> None:
        """For drafters with :attr:`needs_exit_states`: ``states`` (``[m, H]``) entering :attr:`exit_layer` and
        the verifier's logits (``[m, V]``) at the ``m`` verified positions of the step the drafter drafted."""

    def use_costs(self, costs: Calibration) -> None:
        """The machine's calibrated costs (:mod:`leap.core.decoding.calibrate`); called when ``needs_costs``."""

    def shared_state_key(self) -> Any:
        """Drafters of one search whose keys are equal (and not None) may share their model state: the search
        runner (:class:`leap.search.runner.OnlineSearch`) hands a new option :meth:`share_state` from an earlier
        one with the same key - e.g. ``lowbit`` options that differ only in chain length share one llama.cpp
        context, so the prompt is taken in once, not once per option. None (the default): never shared."""
        return None

    def share_state(self, other: Drafter) -> None:
        """Take over ``other``'s model state (called before :meth:`use_model`, only when the keys are equal; ``other``
        is the twin's :meth:`state_owner`)."""

    def state_owner(self) -> Drafter:
        """The drafter that holds the model state :meth:`shared_state_key` names: this one, or the part of a composite
        drafter that does (``cascade``'s second part, a ``lowbit``), so that a ``lowbit`` option and a ``cascade`` share
        one runner whichever of them the search made first."""
        return self

    def use_model(self, model: Any) -> None:
        """The target :class:`~leap.core.modeling.model.LeapModel`; called when ``needs_model``."""

    def use_sampling(self, settings: Any) -> None:
        """The request's :class:`~leap.core.verify.sampling.SamplingSettings` (temperature, top-p); called
        whenever the drafter joins a session, so drafters drawing their own tokens can match them."""

    def observe(self, inputs: Sequence[int], logits: torch.Tensor) -> None:
        """``logits[i]`` is the target's distribution after ``inputs[:i+1]`` (all verified correct)."""

    def observe_features(self, start: int, features: torch.Tensor) -> None:
        """``features[i]`` (``[m, H]``) is the verifier's final-normed top-layer state at position ``start + i``
        (every position verified correct); called for drafters with ``needs_features``: once with the whole
        verified context when the drafter joins a session, then after every verification."""

    def feedback(self, drafted: int, accepted: int) -> None:
        """``accepted`` of the ``drafted`` proposed tokens were kept."""

    def finish(self, tokens: Sequence[int]) -> None:
        """The request ended with ``tokens`` (prompt + output)."""

    def steady_start(self) -> None:
        """A search is about to time a trial of this drafter, a few steps long
        (:meth:`leap.search.runner.OnlineSearch._trial`, after the drafter has joined the request): a drafter whose pace
        ramps up over a request's first steps (an adaptive draft length) starts where the ramp ends, so that the trial
        reads its pace, not its ramp (``lowbit``'s chain grows by 2 a step accepted whole, from ``num_tokens`` to
        ``adapt``: a 4-step trial at 6 drafted 6, 8, 10 and 12 tokens where the request went on at 16). The base has
        no ramp."""


drafters: Registry[type[Drafter]] = Registry("drafter", "leap.drafters", ("leap.core.drafters", "leap.heads.drafter",
                                                                                 "leap.heads.exit_drafter"))


def make_drafter(drafter: str | Drafter, **kwargs: Any) -> Drafter:
    """A drafter instance: ``drafter`` itself, or the registered class called with ``kwargs``."""
    return drafter if isinstance(drafter, Drafter) else drafters.create(drafter, **kwargs)
