"""Search spaces for agent tests, built from random metric vectors (no model)."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import strategies as st

from leap.redundancy import build_search_space
from leap.redundancy.space import with_low_bit


@st.composite
def search_spaces(draw, min_layers=4, max_layers=24):
    n = draw(st.integers(min_layers, max_layers))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    R, D = rng.random(n) * 2, rng.normal(0, 0.5, n)
    space = build_search_space(R, D, zones=draw(st.booleans()), groups=draw(st.booleans()),
                               metrics={"cosine": rng.random(n).tolist()})
    return with_low_bit(space) if draw(st.booleans()) else space  # the per-layer precision action too


def reward_of(config) -> float:
    """A deterministic synthetic reward: cheaper drafts pay until too much is skipped."""
    if config is None:
        return 1.0
    skipped = len(config.skipped) / config.num_layers
    return 1.0 + skipped - 3.0 * max(0.0, skipped - 0.3) + 0.01 * (zlib.crc32(str(config).encode()) % 7)  # stable across processes
