"""The restricted draft head (leap.core.modeling.draft_head)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from leap.core.modeling.draft_head import DraftHead
from leap.core.modeling.fast_linear import OneDNNLinear, onednn_available


@pytest.mark.parametrize("packed", [False, True])
def test_draft_head_keeps_the_models_linears_and_its_logits_at_the_kept_ids(packed):
    """Packed (oneDNN) exactly when the model's own head is - load_model packs only where that is measured faster
    on the machine - and the logits at the kept ids are the full head's, -inf elsewhere."""
    if packed and not onednn_available():
        pytest.skip("torch built without oneDNN")
    torch.manual_seed(0)
    lm_head = nn.Linear(16, 40, bias=False)
    head_module = OneDNNLinear(lm_head) if packed else lm_head
    head = DraftHead(head_module, [3, 1, 7, 39, 99])
    assert isinstance(head.proj, OneDNNLinear) == packed
    hidden = torch.randn(2, 16)
    with torch.inference_mode():
        full, draft = lm_head(hidden), head(hidden)
    kept = torch.tensor([1, 3, 7, 39])
    assert torch.allclose(draft[:, kept], full[:, kept], atol=1e-5)
    assert torch.isinf(draft[:, [0, 2, 38]]).all()
