"""leap.heads: learned draft heads on the model's own features (EAGLE), their training data and training.

One algorithm per module: :mod:`.head` (EAGLE-1's feature head: ``fc`` over ``[feature; next-token
embedding]``, one decoder layer, the final norm; save and load), :mod:`.drafter` (the ``eagle`` drafter:
drafts from the verifier's features, which the decoding session hands to drafters with
``needs_features``), :mod:`.prompts` (leap's own seed prompts), :mod:`.data` (the model's answers to them,
with features: self-distillation data), :mod:`.train` (the training loop behind ``leap train-head``),
:mod:`.store` (where heads live: ``$LEAP_CACHE/heads/<model>/`` or shipped package data), :mod:`.online`
(DVI/OSD-style online self-distillation of a head while it drafts: ``eagle online=true``),
:mod:`.exit_head` (Kangaroo/DVI's head on a layer ``k < L``: a low-rank exit adapter and its training,
``leap train-head --layer k``), :mod:`.exit_drafter` (the ``exit-head`` drafter: the layers below ``k``
draft, the exit head reads them).

May import: :mod:`leap.core` (the drafter interface, the model, sampling). :mod:`leap.core` never imports
this package; the ``drafters`` registry loads :mod:`.drafter` and :mod:`.exit_drafter` by name.
"""

from leap.heads.head import FeatureHead, load_head, save_head

__all__ = ["FeatureHead", "load_head", "save_head"]
