"""leap.search.memory: what earlier requests measured, kept for the next request's search.

:class:`SearchMemory` (:mod:`.means`) keeps discounted means per drafter option and condition, prunes the options that
keep losing and says when a request can stop searching; :mod:`.prior` reads the prior leap ships for a model and gives
it this machine's scale; :mod:`.store` says where a memory lives (``$LEAP_CACHE/search_memory``) and hands a new one
its prior (:func:`memory_for`).

May import: :mod:`leap.core.runtime`; never the runner, the agents or the decoder.
"""

from leap.search.memory.means import SearchMemory
from leap.search.memory.store import PRIOR_DIR, memory_for, shipped_prior

__all__ = ["SearchMemory", "memory_for", "shipped_prior", "PRIOR_DIR"]
