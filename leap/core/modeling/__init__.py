"""leap.core.modeling: the model adapter and what runs its layers.

Owns :class:`~leap.core.modeling.model.LeapModel` (loading a GGUF file, a local Hugging Face folder or
a config, and the per-layer functions leap calls), the KV cache and attention (sliding windows
included), oneDNN linears for the CPU, :class:`~leap.core.modeling.layers.LayerStack` (running any
execute/skip/repeat plan), the restricted draft head, prefill traces for redundancy metrics and the
:class:`~leap.core.modeling.probe.Probe` protocol that search agents evaluate configurations through, and
the low-bit runners of the model's own weights (:mod:`~leap.core.modeling.low_bit`).

May import: the foundations (:mod:`leap.core.config`, :mod:`~leap.core.errors`, ...) and
:mod:`leap.core.runtime`. Nothing here knows about drafts, verification or search.
"""
