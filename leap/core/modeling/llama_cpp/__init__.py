"""leap.core.modeling.llama_cpp: what leap reads and writes of llama.cpp's own data.

:mod:`~leap.core.modeling.llama_cpp.seq_state` - llama.cpp's saved state of one sequence (its KV cells), parsed
and written, so that the low-bit draft (:class:`~leap.core.modeling.low_bit.LlamaCppRunner`) can take the target's
keys and values of a prompt instead of computing its own (issue 35: the KV handoff).

May import what :mod:`leap.core.modeling` may; nothing here imports llama-cpp-python itself.
"""
