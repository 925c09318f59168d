"""leap.core.modeling.direct: decoder layers called directly, as torch operators, instead of through their modules.

:mod:`~leap.core.modeling.direct.llama` - transformers' Llama decoder layer (Llama 2/3, SmolLM2, ...): the same
operators in the same order, bitwise equal to the module's own call (checked at run time), without the module calls,
keyword handling and attention-interface lookups around them (issue 35, the verifier toward its floor).

Who calls what: :func:`~leap.core.modeling.direct.llama.layer_call` is what
:meth:`leap.core.modeling.layers.LayerStack.run_layers` and the batch state (:mod:`leap.core.decoding.batch_state`)
call for every decoder layer; it hands any layer it does not take to
:func:`leap.core.modeling.hf_interface.call_layer`.

May import what :mod:`leap.core.modeling` may.
"""
