"""Drafters: what proposes the candidate tokens that the full model verifies.

A :class:`Drafter` proposes a chain of tokens and hears how many were accepted; it never verifies.
The decoder's verify/accept/rollback path is shared by every drafter, so losslessness holds for all
of them (property-tested over the registry). One algorithm per module:

=====================  ===========================================================================
``layer-skip``         the model's own layers under a ``LayerConfig`` (:mod:`.hybrid`)
``prompt-lookup``      n-gram match against the prompt and output (:mod:`.prompt_lookup`)
``token-recycling``    top-k successors recycled from verification logits (:mod:`.token_recycling`)
``suffix``             depth-bounded suffix trie over the prompt and earlier outputs (:mod:`.suffix`)
``hybrid``             a model-free drafter, continued by the layer-skip draft (:mod:`.hybrid`)
``gated``              a model-free drafter that drafts only where its drafts have paid (:mod:`.gated`)
``select``             per step, the model-free drafter whose drafts would have paid (:mod:`.select`)
``stand``              n-gram tables of verifier distributions, stochastic drafts under sampling (:mod:`.stand`)
``lowbit``             the model's own weights at low precision (GGUF via llama.cpp, or int8) (:mod:`.lowbit`)
``eagle``              a trained feature head on the verifier's top layer (:mod:`leap.heads.drafter`)
``exit-head``          the layers below ``k`` and a trained exit head on layer ``k`` (:mod:`leap.heads.exit_drafter`)
=====================  ===========================================================================

Register your own with ``@drafters.register("name")`` or the entry-point group ``leap.drafters``.

May import: the foundations, :mod:`leap.core.runtime` (costs), :mod:`leap.core.modeling` (the low-bit
runner), :mod:`leap.core.trees` and :mod:`leap.core.verify` (draft distributions); the decoding
session imports drafters, never the other way round.
"""

from leap.core.drafters.base import Drafter, drafters, make_drafter
from leap.core.drafters.gated import Gated
from leap.core.drafters.hybrid import Hybrid, LayerSkip
from leap.core.drafters.lowbit import LowBit
from leap.core.drafters.prompt_lookup import PromptLookup
from leap.core.drafters.select import Select
from leap.core.drafters.stand import Stand
from leap.core.drafters.suffix import SuffixDrafter, SuffixTrie
from leap.core.drafters.token_recycling import TokenRecycling

__all__ = ["Drafter", "drafters", "make_drafter", "PromptLookup", "TokenRecycling", "SuffixDrafter", "SuffixTrie",
           "Hybrid", "LayerSkip", "Gated", "Select", "Stand", "LowBit"]
