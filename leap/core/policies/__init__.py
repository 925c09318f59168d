"""leap.core.policies: when to stop drafting - the draft-length policies and their registry.

Owns :class:`~leap.core.policies.base.DraftPolicy`, the ``draft_policies`` registry (entry-point
group ``leap.draft_policies``) and the built-in policies (``fixed``, ``confidence``,
``adaptive-confidence``, ``adaedl`` in :mod:`~leap.core.policies.base`; the UCB1 ``bandit`` over
draft lengths in :mod:`~leap.core.policies.bandit`). The decoding session asks the step's policy
after each drafted token and tells it how many were accepted. For batches, :mod:`~leap.core.policies.batch_caps`
caps the draft tokens per row and step (fixed, or a UCB1 bandit on the batch's measured goodput).

May import: the foundations and :mod:`leap.core.runtime`.
"""

from leap.core.policies.base import DraftPolicy, draft_policies, make_policy

__all__ = ["DraftPolicy", "draft_policies", "make_policy"]
