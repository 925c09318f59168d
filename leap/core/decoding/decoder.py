"""Lossless self-speculative decoding: draft with some layers, verify with all of them in one pass.

One decoding step (:meth:`DecodingSession.step`), in the numbered order of transformers'
``_assisted_decoding``:

1. **Draft.** Feed the pending token through the layers the :class:`~leap.core.config.LayerConfig`
   keeps (skipped layers: not at all; repeated ones: twice), pick a token (argmax, or a sample from
   ``q``), feed it back, until the :class:`~leap.core.policies.base.DraftPolicy` says stop.
2. **Verify.** One forward of the full model over ``[pending, d_1..d_k]`` gives the target
   distributions ``p_1..p_{k+1}``.
3. **Accept.** Greedy prefix match or the speculative sampling rule (:mod:`leap.core.verify.sampling`).
4. **Roll back.** Crop every layer's KV cache to the committed length (per layer: after a draft,
   executed and skipped layers hold caches of different lengths). Nothing is cloned.
5. **Feed back.** The policy hears how many draft tokens were accepted.

Exact-prefix reuse (``reuse_prefix=True``, default): the layers before the first skipped or repeated
layer compute in the draft exactly what the verifier would compute, so their cache entries for draft
tokens are kept and the verifier starts at the first non-executed layer from the hidden states the
draft saved there (LayerSkip's trick for early exit, generalised). Only the last draft token still
runs through those layers during verification.

Plain decoding is the same loop with no draft (``config=None``): step 2 over the pending token alone.

Who calls what: :meth:`SelfSpecDecoder.generate` for a whole prompt; :meth:`SelfSpecDecoder.start`
returns a :class:`DecodingSession` whose :meth:`~DecodingSession.step` takes a configuration per step,
which is how search agents try a new configuration on every real iteration.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from leap.core.runtime.costs import Calibration
from leap.core.config import LayerConfig
from leap.core.drafters import Drafter, make_drafter
from leap.core.errors import SettingsError
from leap.core.modeling.layers import LayerStack
from leap.core.modeling.model import LeapModel
from leap.core.decoding.outcome import GenerationOutcome
from leap.core.policies.base import DraftPolicy, make_policy
from leap.core.verify.sampling import (
    SamplingSettings,
)
from leap.core.verify.tree_rules import TreeRule, make_tree_rule

from leap.core.decoding.session import DecodingSession

__all__ = ["SelfSpecDecoder", "DecodingSession"]


class SelfSpecDecoder:
    """Self-speculative decoder over a :class:`LeapModel`.

    Args:
        model: the model (see :func:`leap.core.modeling.model.load_model`).
        config: the draft's layer configuration; ``None`` = plain autoregressive decoding.
        policy: a draft-length policy name from ``draft_policies`` or an instance.
        policy_kwargs: constructor arguments for a policy given by name.
        reuse_prefix: keep the exact-prefix layers' draft work (see the module docstring).
        draft_vocab: restrict the draft's LM head to this many frequent tokens (plus the prompt's).
        drafter: a drafter (name from ``leap.core.drafters.drafters`` or an instance). Model-free
            drafters (``prompt-lookup``, ``token-recycling``, ``suffix``) draft instead of the layer
            configuration; ``layer-skip`` is the configuration's draft; ``hybrid`` drafts model-free and
            lets the configuration's draft continue the chain when it has no candidate.
        drafter_kwargs: constructor arguments for a drafter given by name.
        costs: the machine's :class:`~leap.core.decoding.calibrate.Calibration` for drafters and policies that
            read costs (``select``, ``bandit``) and the cost-model reward; default: measured on first
            use and cached (:func:`leap.core.decoding.calibrate.calibration_for`).
        tree_verify: how draft trees are verified under sampling: a rule name from
            :data:`leap.core.verify.tree_rules.tree_rules` (``match``, default; ``traversal``) or an instance.
            Greedy decoding always uses exact match.
        low_bits: the precision of layers the configuration runs at low precision (``Q``, LOW):
            8 (weight-only int8, default) or 4 (int4 in groups of 32); see
            :mod:`leap.core.modeling.low_bit_layers`.

    Example::

        model = load_model("smollm2")
        decoder = SelfSpecDecoder(model, LayerConfig.from_sets(30, skip=[10, 14, 18]))
        out = decoder.generate("What is speculative decoding?", max_new_tokens=64, chat=True)
        print(out.text, out.mean_accepted)
    """

    def __init__(
        self,
        model: LeapModel,
        config: LayerConfig | None = None,
        policy: str | DraftPolicy = "confidence",
        *,
        policy_kwargs: dict | None = None,
        reuse_prefix: bool = True,
        draft_vocab: int | None = None,
        drafter: str | Drafter | None = None,
        drafter_kwargs: dict | None = None,
        costs: Calibration | None = None,
        tree_verify: str | TreeRule | None = None,
        low_bits: int = 8,
        engine: str | None = None,
    ) -> None:
        from leap.core.modeling.low_bit_layers import BITS

        if low_bits not in BITS:
            raise SettingsError(f"low_bits must be one of {BITS}, got {low_bits}")
        self.low_bits = int(low_bits)
        self.model = model
        self.tree_rule = make_tree_rule(tree_verify)
        self._costs = costs
        self.stack = LayerStack(model, engine)
        if config is not None:
            config.check_num_layers(model.num_layers)
        self.config = config
        self.policy = make_policy(policy, **(policy_kwargs or {}))
        self.reuse_prefix = reuse_prefix
        if draft_vocab is not None and draft_vocab < 1:
            raise SettingsError(f"draft_vocab must be a positive number of tokens, got {draft_vocab}")
        self.draft_vocab = draft_vocab
        self.drafter = make_drafter(drafter, **(drafter_kwargs or {})) if drafter is not None else None

    @property
    def costs(self) -> Calibration:
        """The machine's calibrated costs for this model (measured on first use, then cached)."""
        if self._costs is None:
            from leap.core.decoding.calibrate import calibration_for

            self._costs = calibration_for(self.model)
        return self._costs

    def start(
        self,
        prompt: str | Sequence[int],
        *,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        chat: bool = False,
        trace_positions: int | None = None,
    ) -> DecodingSession:
        """Prefill ``prompt`` (text or token ids) and return a session to step through.

        With ``trace_positions=N`` the prefill also keeps a :class:`~leap.core.modeling.trace.LayerTrace` of
        its last N positions (``session.trace``), from which redundancy metrics are computed without
        a second forward pass.
        """
        ids = self.model.encode(prompt, chat=chat) if isinstance(prompt, str) else [int(i) for i in prompt]
        settings = SamplingSettings(temperature, top_p)
        if generator is None:
            generator = torch.Generator(device=self.model.device)
            if seed is None:
                generator.seed()
            else:
                generator.manual_seed(int(seed))
        if (self.drafter is not None and self.drafter.needs_costs) or self.policy.needs_costs:
            self.costs  # noqa: B018 - a first use calibrates here, before the request, never inside a step
        session = DecodingSession(self, ids, max_new_tokens, settings, generator, trace_positions)
        if self.drafter is not None:  # the drafter hears the prompt now, not inside the first timed step
            with torch.inference_mode():
                session.attach(self.drafter)
        return session

    def generate(self, prompt: str | Sequence[int], **kwargs) -> GenerationOutcome:
        """Decode ``prompt`` to EOS or ``max_new_tokens`` (arguments as in :meth:`start`)."""
        session = self.start(prompt, **kwargs)
        while not session.done:
            session.step()
        return session.outcome()


