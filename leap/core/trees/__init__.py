"""leap.core.trees: the shape of a draft - chains and trees of candidate tokens.

Owns :class:`~leap.core.trees.draft_tree.DraftTree` (nodes, parents, tree attention masks, the draw
distribution of each sampled node), OPT-Tree's budget cut by the calibrated costs
(:mod:`~leap.core.trees.opt_tree`) and sampled trees filled by Gumbel-Top-K with delayed expansion
(:mod:`~leap.core.trees.stochastic_tree`). Drafters build trees; the decoding session verifies them.

May import: the foundations and :mod:`leap.core.runtime`.
"""
