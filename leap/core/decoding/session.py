"""One prompt's decoding state and its draft / verify / accept / roll back / feed back step.

The step itself is described in :mod:`leap.core.decoding.decoder`'s docstring (the numbered order of
transformers' ``_assisted_decoding``). :class:`DecodingSession` is created by
:meth:`leap.core.decoding.decoder.SelfSpecDecoder.start`; search runners and environments call
:meth:`DecodingSession.step` with a configuration or drafter per step.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from leap.core.config import LayerConfig
from leap.core.decoding.step_draft import StepDraft as _Draft
from leap.core.decoding.step_draft import commit_cut
from leap.core.decoding.step_draft import describe as _describe
from leap.core.decoding.exit_tree import draft_exit_tree
from leap.core.modeling.draft_head import DraftHead
from leap.core.trees.draft_tree import DraftTree
from leap.core.drafters import Drafter
from leap.core.errors import ContextLengthError, SettingsError
from leap.core.modeling.kv_cache import PromptKV
from leap.core.modeling.layers import plan_for
from leap.core.modeling.low_bit_layers import replacements
from leap.core.decoding.outcome import GenerationOutcome, StepRecord
from leap.core.verify.sampling import (
    SamplingSettings,
    greedy_accept,
    greedy_accept_deferred,
    sample,
    speculative_accept,
    target_probs,
)
from leap.core.modeling.trace import LayerTrace, trace_from_prefill

__all__ = ["DecodingSession", "HOST_READS_PER_STEP", "HOST_READS_PER_LAYER_TOKEN"]

#: Host reads of device tensors (syncs on a GPU) the session itself makes per step, beyond what its drafter,
#: draft policy and tree rule declare (``host_reads_per_*`` on their base classes): verification reads the
#: accepted count and the next token once (greedy or sampled, chain or tree). A layer draft under sampling,
#: or with a policy that reads, reads each token it drafts (to sample, feed back and check for EOS); a greedy
#: layer draft with a policy that reads nothing reads none - its tokens come with verification's one read,
#: so a greedy layer-drafted step makes one read in all. ``tests/core/runtime/test_host_reads.py``
#: counts them at run time (:class:`leap.core.runtime.host_reads.HostReads`) for every registered
#: drafter, policy and rule.
HOST_READS_PER_STEP = 1
HOST_READS_PER_LAYER_TOKEN = 1


_DEFAULT = object()  # "use the decoder's configuration" in DecodingSession.step


class DecodingSession:
    """The state of one prompt's decoding: committed tokens, KV cache, step records.

    Invariant between steps: every layer's cache holds ``len(tokens) - 1`` entries; the last committed
    token is pending (chosen, not yet fed through the model).
    """

    def __init__(
        self,
        decoder: Any,  # the SelfSpecDecoder that started this session (it imports this module)
        prompt_ids: list[int],
        max_new_tokens: int,
        settings: SamplingSettings,
        generator: torch.Generator,
        trace_positions: int | None = None,
    ) -> None:
        model = decoder.model
        if not prompt_ids:
            raise SettingsError("the prompt is empty; give at least one token")
        if int(max_new_tokens) < 1:
            raise SettingsError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        bad = [i for i in prompt_ids if not 0 <= i < model.vocab_size]
        if bad:
            raise SettingsError(f"token ids {bad[:5]} are outside the vocabulary (0..{model.vocab_size - 1})")
        if len(prompt_ids) + max_new_tokens > model.max_context:
            raise ContextLengthError(
                f"the prompt has {len(prompt_ids)} tokens and {max_new_tokens} new tokens were asked for, "
                f"but {model.name} holds at most {model.max_context}; shorten the prompt or lower "
                "--max-new-tokens"
            )
        self.decoder = decoder
        self.stack = decoder.stack
        self.policy = decoder.policy
        self.settings = settings
        self.generator = generator
        self.prompt_len = len(prompt_ids)
        self.max_new_tokens = int(max_new_tokens)
        self.tokens: list[int] = list(prompt_ids)
        self.steps: list[StepRecord] = []
        self.stop_reason = ""
        self._eos = model.eos_token_ids
        self._drafters: list[Drafter] = []  # every drafter attached to this session (see attach)
        self._draft_head = (
            DraftHead.lowest_ids(model.lm_head, decoder.draft_vocab, [*prompt_ids, *self._eos])
            if decoder.draft_vocab
            else None
        )
        self.cache = self.stack.new_cache(len(prompt_ids) + self.max_new_tokens)
        # the verifier's top-layer states of the verified positions 0.. (chunks), for needs_features drafters
        self._hidden: list[torch.Tensor] = []
        self.trace: LayerTrace | None = None
        clock = self.stack.step_clock
        with torch.inference_mode():
            t0 = clock.mark()
            if len(prompt_ids) > 1:
                record: dict[int, torch.Tensor] | None = {} if trace_positions else None
                out = self.stack.run_layers(
                    self.stack.embed(prompt_ids[:-1]), self.stack.full_plan, self.cache, 0, record=record
                )
                if record is not None:
                    self.trace = trace_from_prefill(model, record, out, self.cache, int(trace_positions))
                self._hidden.append(out[0])
            t1 = clock.mark()
            clock.settle()
            self.prefill_time_s = clock.seconds(t0, t1)
        self.decode_time_s = 0.0

    # ------------------------------------------------------------------ views
    @property
    def new_token_ids(self) -> list[int]:
        return self.tokens[self.prompt_len :]

    @property
    def done(self) -> bool:
        return bool(self.stop_reason)

    @property
    def remaining(self) -> int:
        return self.max_new_tokens - len(self.new_token_ids)

    # ------------------------------------------------------------------ one iteration
    def step(self, config: LayerConfig | None = _DEFAULT, drafter: Drafter | None = _DEFAULT) -> StepRecord:  # type: ignore[assignment]
        """One draft/verify iteration under ``config`` (default: the decoder's; None: plain) and
        ``drafter`` (default: the decoder's; None: the layer-skip draft of ``config``)."""
        if self.done:
            raise RuntimeError(f"this session has finished ({self.stop_reason}); start a new one")
        cfg = self.decoder.config if config is _DEFAULT else config
        if cfg is not None:
            cfg.check_num_layers(self.stack.num_layers)
        drafter = self.decoder.drafter if drafter is _DEFAULT else drafter
        with torch.inference_mode():  # attaching included: a drafter may read the verifier's features
            if drafter is not None:
                self.attach(drafter)
            record = self._step(cfg, drafter)
        self.steps.append(record)
        self.decode_time_s += record.time_s
        return record

    def attach(self, drafter: Drafter) -> None:
        """Make ``drafter`` part of this session (done on its first use): it hears the prompt, then
        (if it learns from the verifier) observes every later verification, whichever drafter
        drafted, and hears the end. Idempotent."""
        if any(d is drafter for d in self._drafters):
            return
        if drafter.needs_costs:
            drafter.use_costs(self.decoder.costs)
        if drafter.needs_model:
            drafter.use_model(self.decoder.model)
        drafter.use_sampling(self.settings)
        if drafter.takes_prompt_kv:  # the prompt's positions are the prefill's, never written since
            drafter.use_prompt_kv(PromptKV(self.cache, self.prompt_len - 1))
        drafter.begin(self.tokens[: self.prompt_len])
        if drafter.needs_features and self._hidden:
            self._hidden = [torch.cat(self._hidden)]
            drafter.observe_features(0, self.decoder.model.norm(self._hidden[0]))
        self._drafters.append(drafter)

    def _step(self, cfg: LayerConfig | None, drafter: Drafter | None) -> StepRecord:
        """One iteration, in the numbered order of the module docstring; each part is a method below."""
        stack, clock = self.stack, self.stack.step_clock
        base = len(self.tokens) - 1  # cache length of every layer; tokens[base] is pending
        draft = _Draft(t_start=clock.mark())
        max_k = self.remaining - 1  # the verifier always adds one token of its own

        # 1. Draft: model-free tokens first, then (if the drafter lets it) the layer-skip draft; a drafter
        # with an exit layer drafts with the layers below it, all of them when the step has no configuration
        exit = drafter if drafter is not None and drafter.exit_layer is not None else None
        cfg = LayerConfig.full(stack.num_layers) if cfg is None and exit is not None else cfg
        if exit is not None and exit.tree_nodes > 1 and self.settings.greedy and max_k > 0:  # its tree, one pass
            tree, passes = draft_exit_tree(self, exit, cfg, base, max_k)  # of the layers below k per depth
            return self._tree_step(tree, drafter, draft.t_start, passes, cfg)
        if drafter is not None and max_k > 0:
            sampled = drafter.samples_drafts and not self.settings.greedy
            tree = drafter.propose_sampled_tree(self.tokens, max_k, self.generator) if sampled \
                else drafter.propose_tree(self.tokens, max_k)
            if self._verify_as_tree(tree, cfg, drafter):
                return self._tree_step(tree, drafter, draft.t_start)
            draft.take_free(tree.tokens[:max_k], tree.draws[:max_k], self._eos, None if self.settings.greedy else
                            (self.decoder.model.vocab_size, self.stack.device))  # step 1a
        layered = (cfg is not None and len(draft.tokens) < max_k and not (draft.tokens and draft.tokens[-1] in self._eos)
                   and (drafter is None or drafter.continue_with_layers(len(draft.tokens))))
        if layered:
            self._draft_with_layers(draft, cfg, base, max_k, exit)
        t_draft = clock.mark()

        # 2. Verify: one forward of the full model; 3. Accept
        states = {} if exit is not None and exit.needs_exit_states else None  # each layer's input, verified
        hidden, logits = self._verify(draft, base, states)
        accepted, next_token = self._accept(draft, logits)
        k = len(draft.tokens)
        pending = self.tokens[base]
        self._commit([*draft.tokens[:accepted], next_token])

        # 4. Roll back every layer to the committed length (all but the pending token)
        stack.rollback(self.cache, len(self.tokens) - 1)

        # 5. Feed back: drafters that learn from the verifier see the verified-correct positions
        if states:  # an exit drafter learning online: its layer's verified inputs and the verifier's logits
            exit.observe_exit_states(states[exit.exit_layer][0, : accepted + 1], logits[: accepted + 1])
        self._feed_back(drafter, [pending, *draft.tokens[:accepted]], logits[: accepted + 1], k, accepted,
                        hidden[0, : accepted + 1], base)
        if layered and k:
            self.policy.feedback(k, accepted)
        t_end = clock.mark()
        clock.settle()  # the step's one synchronisation: every mark above can be read now
        return StepRecord(
            drafted=k,
            accepted=accepted,
            committed=len(self.tokens) - 1 - base,
            draft_time_s=clock.seconds(draft.t_start, t_draft),
            verify_time_s=clock.seconds(t_draft, t_end),
            forward_time_s=sum(clock.seconds(a, b) for a, b in draft.spans),
            layer_passes=draft.layer_tokens * draft.passes if layered else 0,
            config=_describe(drafter, cfg if layered or drafter is None else None),
            layer_tokens=draft.layer_tokens,
            drafter=None if drafter is None or drafter.name == "layer-skip" else drafter.name,
        )

    def _verify_as_tree(self, tree: DraftTree, cfg: LayerConfig | None, drafter: Drafter) -> bool:
        """Step 1a: a branching tree is verified with tree attention and the decoder's tree rule; under
        sampling so is a model-free chain when the rule verifies chains (``traversal``) and the
        layer-skip draft will not continue it."""
        if not tree.is_chain:
            return True
        return (not self.settings.greedy and self.decoder.tree_rule.verifies_chains and len(tree) > 0
                and not (cfg is not None and drafter.continue_with_layers(len(tree))))

    def _draft_with_layers(self, draft: _Draft, cfg: LayerConfig, base: int, max_k: int,
                           exit: Drafter | None = None) -> None:
        """Step 1b: the layer-skip draft continues the chain token by token until the policy stops it.
        Layers before the first skipped/repeated one (the exact prefix) keep their cache entries and
        their outputs (``draft.saved``) for verification; the others are rolled back afterwards. With an
        ``exit`` drafter only the layers below its exit layer run, and its head reads their output."""
        stack, clock, settings = self.stack, self.stack.step_clock, self.settings
        passes = [a.passes for a in cfg.actions]
        stop = exit.exit_layer if exit is not None else len(passes)
        draft.prefix = min(cfg.exact_prefix, stop) if self.decoder.reuse_prefix else 0
        head_plan, tail_plan = plan_for(passes, 0, draft.prefix), plan_for(passes, draft.prefix, stop)
        draft.passes = sum(passes[:stop])
        low = replacements(self.decoder.model, cfg, self.decoder.low_bits) if cfg.low else None
        if self.policy.needs_costs:
            self.policy.use_costs(self.decoder.costs, draft.passes)
        self.policy.begin()
        # greedy, with a policy that reads nothing: the drafted tokens stay on the device until verification
        # reads them with its own result (one read per step); EOS is then cut by _commit
        deferred = settings.greedy and self.policy.host_reads_per_token == 0
        feed, fed = [self.tokens[base], *draft.tokens], 0  # model-free tokens go through the layers in one pass
        while draft.count < max_k:
            t0 = clock.mark()
            hidden = stack.run_layers(stack.embed(feed), head_plan, self.cache, base + fed)
            draft.saved.append(hidden)
            hidden = stack.run_layers(hidden, tail_plan, self.cache, base + fed, replace=low)
            logits = (exit.exit_logits if exit else partial(stack.logits, head=self._draft_head))(hidden[:, -1:])[0]
            draft.spans.append((t0, clock.mark()))
            fed += len(feed)
            q = target_probs(logits.unsqueeze(0), settings)[0]
            draft.q_rows.append(q)
            draft.layer_tokens += 1
            if deferred:
                feed = logits.argmax().view(1)
                draft.on_device.append(feed)
                if self.policy.should_stop(draft.count, q):
                    break
                continue
            token = int(logits.argmax().item()) if settings.greedy else sample(q, self.generator)
            draft.tokens.append(token)
            feed = [token]
            if token in self._eos or self.policy.should_stop(len(draft.tokens), q):
                break
        stack.rollback(self.cache, base, range(draft.prefix, stack.num_layers))

    def _verify(self, draft: _Draft, base: int, record: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Step 2: the full model over ``[pending, d_1..d_k]`` in one forward -> its top-layer states
        ``[1, k + 1, H]`` and ``[k + 1, V]`` logits.
        With an exact prefix, only the last draft token runs through the prefix layers."""
        stack, clock = self.stack, self.stack.step_clock
        k = draft.count
        t0 = clock.mark()
        if k and draft.prefix:
            full = stack.full_plan
            last = stack.run_layers(stack.embed(draft.ids()[-1:]), full[: draft.prefix], self.cache, base + k)
            hidden = torch.cat([*draft.saved, last], dim=1)
            hidden = stack.run_layers(hidden, full[draft.prefix:], self.cache, base, record=record)
        else:
            hidden = stack.run_layers(stack.embed(draft.ids(self.tokens[base])), stack.full_plan, self.cache, base,
                                      record=record)
        logits = stack.logits(hidden)
        draft.spans.append((t0, clock.mark()))
        return hidden, logits

    def _accept(self, draft: _Draft, logits: torch.Tensor) -> tuple[int, int]:
        """Step 3: greedy prefix match, or the speculative sampling rule."""
        if self.settings.greedy:
            if draft.on_device:  # the deferred tokens and the verdict in one read
                accepted, next_token, chain = greedy_accept_deferred(draft.tokens, torch.cat(draft.on_device), logits)
                draft.tokens.extend(chain)
                draft.on_device.clear()
                eos = next((i for i, t in enumerate(draft.tokens) if t in self._eos), accepted)  # drafted past EOS:
                return (eos, draft.tokens[eos]) if eos < accepted else (accepted, next_token)  # the target's EOS
            return greedy_accept(draft.tokens, logits)
        p = target_probs(logits, self.settings)
        q = torch.stack(draft.q_rows) if draft.q_rows else p[:0]
        return speculative_accept(draft.tokens, q, p, self.generator)

    def _tree_step(self, tree: DraftTree, drafter: Drafter, t_start, layer_passes: int = 0,
                   cfg: LayerConfig | None = None) -> StepRecord:
        """Verify a branching draft tree in one forward with tree attention (see
        :mod:`leap.core.trees.draft_tree`), keep the accepted path's cache entries, commit. An exit drafter's
        tree names the ``layer_passes`` it cost and the configuration ``cfg`` it drafted under."""
        stack, clock = self.stack, self.stack.step_clock
        base = len(self.tokens) - 1
        pending = self.tokens[base]
        t_draft = clock.mark()
        hidden = stack.run_layers(
            stack.embed([pending, *tree.tokens]), stack.full_plan, self.cache, base,
            positions=tree.positions(base), mask=tree.attention_mask(base, stack.dtype, stack.device),
        )
        logits = stack.logits(hidden)
        t_fwd = clock.mark()
        rows, next_token = self.decoder.tree_rule.accept(tree, logits, self.settings, self.generator)
        accepted = [tree.tokens[r - 1] for r in rows]
        self._commit([*accepted, next_token])
        stack.keep(self.cache, base + 1, [base + r for r in rows])
        stack.rollback(self.cache, len(self.tokens) - 1)
        self._feed_back(drafter, [pending, *accepted], logits[[0, *rows]], len(tree), len(rows), hidden[0, [0, *rows]],
                        base)
        t_end = clock.mark()
        clock.settle()
        return StepRecord(
            drafted=len(tree),
            accepted=len(rows),
            committed=len(self.tokens) - 1 - base,
            draft_time_s=clock.seconds(t_start, t_draft),
            verify_time_s=clock.seconds(t_draft, t_end),
            forward_time_s=clock.seconds(t_draft, t_fwd),
            layer_passes=layer_passes,
            config=_describe(drafter, cfg),
            drafter=drafter.name,
        )

    def _commit(self, new: list[int]) -> None:
        """Append ``new`` up to EOS and within the budget; set :attr:`stop_reason` (:func:`commit_cut`)."""
        kept, reason = commit_cut(new, self._eos, self.remaining)
        self.tokens.extend(kept)
        self.stop_reason = self.stop_reason or reason

    def _feed_back(self, drafter: Drafter | None, inputs: list[int], logits: torch.Tensor, drafted: int,
                   accepted: int, hidden: torch.Tensor, base: int) -> None:
        """Step 5: verified-correct inputs, their top-layer states and logits to every attached drafter that
        learns from them, acceptance to the drafter that drafted, the end of the request to all."""
        self._hidden.append(hidden)
        features = self.decoder.model.norm(hidden) if any(d.needs_features for d in self._drafters) else None
        for d in (d for d in self._drafters if d.needs_features):
            d.observe_features(base, features)
        for d in self._drafters:
            if d.needs_logits:
                d.observe(inputs, logits)
        if drafter is not None:
            drafter.feedback(drafted, accepted)
        if self.stop_reason:
            for d in self._drafters:
                d.finish(self.tokens)

    # ------------------------------------------------------------------ result
    def outcome(self) -> GenerationOutcome:
        """The :class:`GenerationOutcome` so far (complete once :attr:`done`)."""
        cfg, drafter = self.decoder.config, self.decoder.drafter
        if cfg is None and drafter is not None and drafter.exit_layer is not None:  # its layers below the exit
            cfg = LayerConfig.full(self.stack.num_layers)
        uses_layers = cfg is not None and (drafter is None or drafter.continue_with_layers(0))
        return GenerationOutcome(
            text=self.decoder.model.decode(self.new_token_ids), token_ids=list(self.new_token_ids),
            prompt_tokens=self.prompt_len, wall_time_s=self.prefill_time_s + self.decode_time_s,
            prefill_time_s=self.prefill_time_s, stop_reason=self.stop_reason or "running",
            config=_describe(drafter, cfg if uses_layers else None), policy=self.policy.name if uses_layers else None,
            temperature=self.settings.temperature, top_p=self.settings.top_p, steps=list(self.steps),
            policy_state=self.policy.state() if uses_layers else {},
        )
