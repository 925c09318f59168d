"""The GPU engine: a static, position-indexed KV cache (``static_cache``) and per-layer CUDA graphs replayed over it
(``engine``), so that any layer configuration - executed, skipped, repeated layers in any order - is a sequence of
replays. :class:`~leap.core.modeling.layers.LayerStack` uses them with ``engine="static"`` or ``"graphs"``. Batches
(B > 1) on static buffers with their layers replayed: :mod:`leap.core.modeling.graphs.batch` (imported where used: it
builds on :mod:`leap.core.decoding.batch_state`).
"""

from leap.core.modeling.graphs.engine import LayerGraphs
from leap.core.modeling.graphs.static_cache import StaleSlotError, StaticKVCache

__all__ = ["LayerGraphs", "StaticKVCache", "StaleSlotError"]
