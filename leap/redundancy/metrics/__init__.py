"""leap.redundancy.metrics: the built-in redundancy metrics, one per module.

``residual-ratio`` (LEAP's R, :mod:`.residual_ratio`), ``ear-gain`` (LEAP's Delta L, :mod:`.ear_gain`),
``cosine`` (input/output similarity, :mod:`.cosine`) and ``attention-entropy``
(:mod:`.attention_entropy`). Each subclasses :class:`leap.redundancy.base.RedundancyMetric` and registers
itself in ``redundancy_metrics``; the registry imports these modules when a name is looked up.

May import: :mod:`leap.redundancy.base` and :mod:`leap.core` (traces, the model, device-safe transfers).
"""
