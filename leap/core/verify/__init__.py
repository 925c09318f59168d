"""leap.core.verify: which drafted tokens the target keeps.

Owns the acceptance rules for chains (greedy prefix match and the speculative sampling rule,
:mod:`~leap.core.verify.sampling`, with ``SamplingSettings``) and the registry of tree verification
rules (:mod:`~leap.core.verify.tree_rules`: token matching; :mod:`~leap.core.verify.traversal`:
Traversal Verification). Every rule is lossless: greedy output equals plain greedy decoding and
sampled output follows the target distribution.

May import: the foundations, :mod:`leap.core.runtime` and :mod:`leap.core.trees`; drafters and the
decoding session import it.
"""
